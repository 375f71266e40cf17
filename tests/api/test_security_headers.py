"""Every answer carries the security headers; oversized or malformed request bodies are refused up front."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.factory import PROD
from txnwatch.serve.api.middleware import MAX_BODY_BYTES, SECURITY_HEADERS


@pytest.mark.parametrize(("method", "url", "status"), [
    ("GET", "/api/v1/transactions", 200),
    ("GET", "/healthz", 200),
    ("GET", "/metrics", 200),
    ("GET", "/api/v1/transactions?cluster=nowhere", 404),
    ("GET", "/api/v1/transactions?limit=0", 422),
    ("POST", "/api/v1/admin/abort", 403),  # admin actions are off by default
])
def test_security_headers_on_every_answer(client: TestClient, method: str, url: str, status: int) -> None:
    response = client.request(method, url)
    assert response.status_code == status, response.text
    for name, value in SECURITY_HEADERS.items():
        assert response.headers[name] == value, name
    assert len(response.headers.get_list("x-frame-options")) == 1


@pytest.mark.parametrize("length", [str(MAX_BODY_BYTES + 1), "12abc", "-1"])
def test_oversized_or_malformed_content_length_is_413(client: TestClient, length: str) -> None:
    response = client.post(f"/api/v1/transactions/{PROD}/x", content=b"{}", headers={"content-length": length})
    assert response.status_code == 413
    assert response.json() == {"detail": f"request body larger than {MAX_BODY_BYTES} bytes"}
    assert response.headers["x-content-type-options"] == "nosniff"


def test_body_at_the_limit_passes_the_middleware(client: TestClient) -> None:
    response = client.post(f"/api/v1/transactions/{PROD}/x", content=b"x" * MAX_BODY_BYTES)
    assert response.status_code == 405  # reached the router: a read-only route refuses POST
