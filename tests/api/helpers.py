"""Small assertions shared by the API tests."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def ok(client: TestClient, url: str, **params: Any) -> Any:
    response = client.get(url, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def walk(client: TestClient, url: str, **params: Any) -> list[list[dict[str, Any]]]:
    """Every page of a paginated list, following next_cursor to the end."""
    pages, cursor = [], None
    for _ in range(1000):
        page = ok(client, url, **params, **({"cursor": cursor} if cursor else {}))
        pages.append(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
    raise AssertionError("pagination never ended")


def flat(pages: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    return [item for page in pages for item in page]


def invalid_param(client: TestClient, url: str, name: str, **params: Any) -> str:
    """The request is refused with a 422 whose detail names ``name``; returns its message."""
    response = client.get(url, params=params)
    assert response.status_code == 422, response.text
    errors = response.json()["detail"]
    named = [e for e in errors if name in e["loc"]]
    assert named, errors
    return named[0]["msg"]
