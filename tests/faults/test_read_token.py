"""One read token covers every endpoint that reveals cluster data (issue 15, defect 4).

/metrics carries transactional ids, topics and groups as labels and /openapi.json and /docs
describe the deployment: with ``api.read_token`` set, each needs the token, as does any path
added later (the guard denies by default).  The probes stay open for Kubernetes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.migrated import migrate
from txnwatch.core.config import Settings
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.api.sessions import COOKIE, LEGACY_COOKIE
from txnwatch.serve.app import create_app

TOKEN = "r34d-t0ken"
GUARDED = ["/metrics", "/openapi.json", "/docs", "/redoc", "/api/v1/clusters", "/api/v1/alerts", "/no/such/page"]


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{tmp_path_factory.mktemp('token') / 'db.sqlite'}"
    migrate(url)
    # Many wrong tokens from one client here: a limit of failures these tests never reach (test_auth_throttle).
    runtime = build_runtime(Settings(database_url=url, api={"read_token": TOKEN, "auth_failures_per_window": 10_000},
                                     clusters=[{"name": "c", "bootstrap_servers": "h:9092"}]), collect=False)
    yield TestClient(create_app(runtime, manage_lifecycle=False), raise_server_exceptions=False)
    runtime.engine.dispose()


@pytest.mark.parametrize("path", GUARDED)
def test_every_data_path_needs_the_token(client: TestClient, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                    {"Authorization": f"Bearer {TOKEN}x"}, {"Cookie": f"{COOKIE}=nope"}):
        response = client.get(path, headers=headers)
        assert response.status_code == 401, (path, headers, response.status_code)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.headers["x-content-type-options"] == "nosniff"
        assert TOKEN not in response.text
    ok = client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code != 401
    # A cookie holding the token itself is no session (issue 23 item 8), under the old name or the new one.
    for name in (COOKIE, LEGACY_COOKIE):
        assert client.get(path, headers={"Cookie": f"{name}={TOKEN}"}).status_code == 401
    login = client.post("/console/login", data={"token": TOKEN}, follow_redirects=False)
    session = login.cookies[COOKIE]
    client.cookies.clear()  # the other paths' cases send no cookie
    assert TOKEN not in session
    assert client.get(path, headers={"Cookie": f"{COOKIE}={session}"}).status_code == ok.status_code


def test_metrics_with_the_token_are_prometheus_text(client: TestClient) -> None:
    response = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 200 and "txnwatch_" in response.text


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
def test_probes_stay_open(client: TestClient, path: str) -> None:
    assert client.get(path).status_code in (200, 503)


def test_admin_keeps_its_own_token(client: TestClient) -> None:
    assert client.post("/api/v1/admin/abort", json={}).status_code == 403  # admin disabled, not 401


def test_no_token_configured_means_open(tmp_path_factory: pytest.TempPathFactory) -> None:
    url = f"sqlite:///{tmp_path_factory.mktemp('open') / 'db.sqlite'}"
    migrate(url)
    runtime = build_runtime(Settings(database_url=url), collect=False)
    client = TestClient(create_app(runtime, manage_lifecycle=False))
    assert client.get("/metrics").status_code == 200 and client.get("/openapi.json").status_code == 200
    runtime.engine.dispose()
