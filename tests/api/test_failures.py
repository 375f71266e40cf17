"""Read token, database outages (503, never a traceback) and readiness around them."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.conftest import Seeded, make_client, make_settings
from tests.api.factory import PROD, STAGING, seed_scenario
from tests.fixtures.migrated import migrate
from tests.fixtures.postgres_server import PostgresServer, start_postgres
from txnwatch.runtime.wiring import build_runtime
from txnwatch.store.db import make_engine

TOKEN = "s3cret-read-token"
READ_URLS = ["/api/v1/clusters", f"/api/v1/clusters/{PROD}", "/api/v1/transactions",
             f"/api/v1/transactions/{PROD}/orders-app-0_0", "/api/v1/hanging", "/api/v1/lso-stalls",
             "/api/v1/partitions", "/api/v1/consumer-groups", f"/api/v1/consumer-groups/{PROD}/orders-consumer",
             "/api/v1/verification", "/api/v1/alerts"]


def seed(url: str) -> None:
    migrate(url)
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            seed_scenario(session)
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def secured(seeded: Seeded) -> Iterator[TestClient]:
    # Many wrong tokens from one client: a limit of failures never reached here (tests/faults/test_brute_force.py).
    runtime = build_runtime(make_settings(seeded.url, read_token=TOKEN, auth_failures_per_window=10_000),
                            collect=False)
    with make_client(runtime) as client:
        yield client
    runtime.engine.dispose()


@pytest.mark.parametrize("url", READ_URLS)
def test_read_token_required_when_configured(secured: TestClient, url: str) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"},
                    {"Authorization": TOKEN}, {"Authorization": f"Bearer {TOKEN}x"}):
        response = secured.get(url, headers=headers)
        assert response.status_code == 401, (url, headers)
        assert response.headers["WWW-Authenticate"].startswith("Bearer")
        assert TOKEN not in response.text
    assert secured.get(url, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_probes_need_no_token(secured: TestClient) -> None:
    assert secured.get("/healthz").status_code == 200
    assert secured.get("/readyz").status_code in (200, 503)  # not 401: no poll yet, so 503
    assert secured.get("/openapi.json").status_code == 401  # it describes the deployment: same token as the API


@pytest.fixture
def outage_server() -> Iterator[PostgresServer]:
    """Our own server: stopping the session's shared one would break every other test."""
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


@pytest.mark.postgres
def test_database_down_is_503_and_recovers(outage_server: PostgresServer) -> None:
    url = outage_server.create_database("outage")
    seed(url)
    # A list answer kept by the answer cache (serve/answer_cache.py) is served until its max age, then 503.
    runtime = build_runtime(make_settings(url, answer_cache_max_age_seconds=0.05), collect=False)
    now_ms = int(time.time() * 1000)
    for name in (PROD, STAGING):
        runtime.state.update(name, up=True, polls=1, last_poll_at_ms=now_ms, last_success_at_ms=now_ms)
    try:
        with make_client(runtime) as client:
            assert client.get("/readyz").status_code == 200
            assert all(client.get(u).status_code == 200 for u in READ_URLS)

            outage_server.stop("fast")
            time.sleep(0.1)
            for u in READ_URLS:
                response = client.get(u)
                assert response.status_code == 503, (u, response.text)
                assert response.json() == {"detail": "database unreachable; retry shortly"}
                assert response.headers["Retry-After"] == "5"
            ready = client.get("/readyz")
            assert ready.status_code == 503
            assert any(r.startswith("database unreachable") for r in ready.json()["reasons"])
            assert client.get("/healthz").status_code == 200

            outage_server.start_existing()
            assert all(client.get(u).status_code == 200 for u in READ_URLS)
            assert client.get("/readyz").status_code == 200
    finally:
        runtime.engine.dispose()


def test_broken_sqlite_database_is_503(tmp_path) -> None:
    """A SQLite file that vanished and cannot be recreated (its directory is now a file)."""
    folder = tmp_path / "db"
    url = f"sqlite:///{folder / 'txnwatch.db'}"
    seed(url)
    runtime = build_runtime(make_settings(url), collect=False)
    try:
        with make_client(runtime) as client:
            assert client.get("/api/v1/transactions").status_code == 200
            runtime.state.changed()  # a poll came (and failed to write): the kept answer is no longer served
            runtime.engine.dispose()
            shutil.rmtree(folder)
            folder.write_text("not a directory")
            for u in READ_URLS:
                response = client.get(u)
                assert response.status_code == 503, (u, response.text)
                assert "Traceback" not in response.text
                assert response.headers["cache-control"] == "no-store"  # error answers carry them too
    finally:
        runtime.engine.dispose()
