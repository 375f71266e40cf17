"""The pipeline's rollups as the REST API serves them (/api/v1/reports)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.pipeline.history import DAY, NEXT_DAY, seed
from txnwatch.core.config import load_settings
from txnwatch.pipeline.run import Window, run_pipeline
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app
from txnwatch.store.archive import export_history
from txnwatch.store.db import make_engine
from txnwatch.store.migrate import upgrade

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_reports_serve_the_loaded_rollups(spark: Any, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'txnwatch.db'}"
    upgrade(url)
    engine = make_engine(url)
    seed(engine)
    archive = str(tmp_path / "archive")
    export_history(engine, archive)
    out = run_pipeline(spark, archive, Window(DAY.date(), NEXT_DAY.date()), engine)
    engine.dispose()

    settings = load_settings(None, database_url=url, clusters=[dict(name="c1", bootstrap_servers="h:1")])
    client = TestClient(create_app(build_runtime(settings, collect=False), manage_lifecycle=False))
    window = {"since": DAY.date().isoformat(), "until": NEXT_DAY.date().isoformat()}
    served = client.get("/api/v1/reports/c1/transactions", params=window).json()
    expected = [r for r in out["transactions"] if r["cluster"] == "c1" and r["period"] == "day" and r["topic"] == "*"]
    assert served and len(served) == len(expected)
    assert sorted((r["txn_prefix"], r["txn_count"], r["commits"], r["aborts"]) for r in served) == sorted(
        (r["txn_prefix"], r["txn_count"], r["commits"], r["aborts"]) for r in expected)
    assert client.get("/api/v1/reports/c1/topics", params=window).json()
    assert client.get("/api/v1/reports/c1/offenders", params={**window, "limit": 3}).status_code == 200
    assert client.get("/api/v1/reports/nope/lag").status_code == 404
    bad = client.get("/api/v1/reports/c1/lag", params={"since": "2026-02-02", "until": "2026-02-01"})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["query", "since"]
    assert client.get("/api/v1/reports/c1/lag", params={"period": "week"}).status_code == 422
