"""The daemon rides out a database outage and a cluster that vanishes, and recovers by itself."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.fixtures.daemon import start_daemon, wait_for
from tests.fixtures.postgres_server import start_postgres
from txnwatch.lab import faults
from txnwatch.store import models as m
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import upgrade

pytestmark = pytest.mark.lab


def polls_in_db(url: str) -> int:
    engine = make_engine(url)
    try:
        with make_sessionmaker(engine)() as s:
            return int(s.scalar(select(func.count()).select_from(m.Poll)) or 0)
    finally:
        engine.dispose()


def test_database_outage_buffers_polls_and_readyz_says_why(lab_cluster: Any) -> None:
    server = start_postgres()
    d = None
    try:
        url = server.create_database("outage")
        upgrade(url)
        d = start_daemon(database_url=url, poll_interval_seconds=1,
                         clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)])
        wait_for(lambda: d.get("/readyz").status_code == 200, 30, what="ready")
        server.stop(mode="fast")
        body = wait_for(lambda: (r := d.get("/readyz")).status_code == 503 and r.json(), 30, what="readyz 503")
        assert any("database" in reason for reason in body["reasons"])
        assert d.get("/healthz").status_code == 200
        polls_during = wait_for(lambda: (v := d.runtime.state.get("lab")) and v.polls >= 5 and v.polls, 30,
                                what="polls to go on while the database is down")
        assert d.runtime.store_health.ok is False
        server.start_existing()
        wait_for(lambda: d.get("/readyz").status_code == 200, 60, what="readyz to recover")
        assert polls_in_db(url) >= polls_during  # buffered polls were written, none lost within the bound
        assert d.runtime.store_health.dropped_observations == 0
    finally:
        if d is not None:
            d.stop()
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def test_cluster_gone_then_back(require_managed_lab: Any, sqlite_url: str, new_topic: Callable[..., str]) -> None:
    lab = require_managed_lab
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab.bootstrap_servers, request_timeout_ms=2000)])
    try:
        wait_for(lambda: d.get("/readyz").status_code == 200, 30, what="ready")
        with faults.cut_connections(lab, None, block=True):
            view = wait_for(lambda: (v := d.runtime.state.get("lab")) and not v.up and v, 60, what="cluster down")
            assert view.last_error
            alerts = wait_for(lambda: [a for a in d.get("/api/v1/alerts", params={"state": "pending"}).json()["items"]
                                       + d.get("/api/v1/alerts", params={"state": "firing"}).json()["items"]
                                       if a["rule"] == "cluster_down"], 30, what="the cluster_down alert")
            assert alerts[0]["cluster"] == "lab"
        wait_for(lambda: (v := d.runtime.state.get("lab")) and v.up, 120, what="the cluster to come back")
        wait_for(lambda: d.get("/readyz").status_code == 200, 60, what="readyz to recover")
    finally:
        d.stop()
