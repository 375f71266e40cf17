"""Every date, time and number parameter of every GET route, at the edges of its type: 200 or 422, never 500.

Issue 15, defect 5: ``/api/v1/reports/{cluster}/transactions?until=9999-12-31`` answered 500
(the day after the last representable date overflowed).  The routes are read from the OpenAPI
document, so a parameter added later is covered without touching this file.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.migrated import migrate
from txnwatch.core.config import Settings
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app

EDGES = {
    "date": ["9999-12-31", "0001-01-01", "2024-02-30", "10000-01-01"],
    "date-time": ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00", "9999-12-31", "0001-01-01T00:00:00",
                  "9999-12-31T23:59:59.999999"],
    "integer": [str(2**63), str(-2**63 - 1), "-1", "0", str(2**31)],
    "number": ["1e308", "-1e308", "nan", "inf"],
}


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def client(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('hostile') / 'db.sqlite'}"
    else:
        import uuid

        url = request.getfixturevalue("postgres_server").create_database("hostile_" + uuid.uuid4().hex[:10])
    migrate(url)
    runtime = build_runtime(Settings(database_url=url, clusters=[{"name": "c", "bootstrap_servers": "h:9092"}]),
                            collect=False)
    yield TestClient(create_app(runtime, manage_lifecycle=False), raise_server_exceptions=False)
    runtime.engine.dispose()


def _schema_kind(schema: dict[str, Any]) -> str | None:
    for option in [schema, *schema.get("anyOf", [])]:
        kind = option.get("format") if option.get("type") == "string" else option.get("type")
        if kind in EDGES:
            return str(kind)
    return None


def cases(openapi: dict[str, Any]) -> list[tuple[str, str, str]]:
    found = []
    for path, item in openapi["paths"].items():
        get = item.get("get")
        if not get:
            continue
        for param in get.get("parameters", []):
            kind = _schema_kind(param.get("schema", {}))
            if param["in"] == "query" and kind:
                for value in EDGES[kind]:
                    found.append((path.replace("{cluster}", "c").replace("{transactional_id}", "t"),
                                  param["name"], value))
    return found


def test_edge_values_never_answer_500(client: TestClient) -> None:
    todo = cases(client.get("/openapi.json").json())
    assert any(name == "until" and "reports" in path for path, name, _ in todo), "the reports window is not covered"
    failures = []
    for path, name, value in todo:
        response = client.get(path, params={name: value})
        if response.status_code not in (200, 404, 422):
            failures.append(f"GET {path}?{name}={value} -> {response.status_code} {response.text[:120]}")
        elif response.status_code == 422:
            assert name in response.text, f"GET {path}?{name}={value}: the 422 does not name the parameter"
    assert not failures, "\n".join(failures)
