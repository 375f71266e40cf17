"""A PostgreSQL outage costs a bounded number of log lines and no traceback (issue 15, defect 6).

Before the log budget a 75 s outage wrote 880 KB of log with ~190 tracebacks: a line and a
traceback per poll from the alert sink and one per second from the outbox loop.  Now each
failing part logs when it starts failing, a reminder every 5 minutes and its recovery.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from tests.fixtures.daemon import start_daemon, wait_for
from tests.fixtures.postgres_server import PostgresServer, start_postgres
from txnwatch.store.migrate import upgrade

pytestmark = pytest.mark.lab
OUTAGE_S = 10
MAX_LINES = 15


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    """Our own server: stopping the session's shared one would break every other test."""
    srv = start_postgres()
    try:
        yield srv
    finally:
        srv.stop()
        shutil.rmtree(srv.root, ignore_errors=True)


def test_postgres_outage_logs_a_bounded_number_of_lines(lab_cluster: Any, server: PostgresServer,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    url = server.create_database("logbudget")
    upgrade(url)
    with fake_pagerduty() as pd:
        d = start_daemon(database_url=url, poll_interval_seconds=1,
                         clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)],
                         pagerduty=dict(enabled=True, routing_key="k", events_url=pd.url))
        try:
            wait_for(lambda: d.get("/readyz").status_code == 200, 60, what="ready")
            caplog.clear()
            caplog.set_level(logging.INFO)
            polls_before = d.runtime.state.get("lab").polls  # type: ignore[union-attr]
            server.stop(mode="fast")
            started = time.monotonic()
            wait_for(lambda: time.monotonic() - started > OUTAGE_S, OUTAGE_S + 5, what="the outage")
            polls_during = d.runtime.state.get("lab").polls - polls_before  # type: ignore[union-attr]
            server.start_existing()
            wait_for(lambda: d.get("/readyz").status_code == 200, 60, what="readyz to recover")
            time.sleep(2)
            records = [r for r in caplog.records if r.levelno >= logging.WARNING]
            traced = [r for r in caplog.records if r.exc_info]
        finally:
            d.stop()
    text = "\n".join(f"{r.levelname} {r.name}: {r.getMessage()[:160]}" for r in records)
    print(f"{OUTAGE_S}s PostgreSQL outage, {polls_during} polls: {len(records)} warning+ lines, "
          f"{len(traced)} tracebacks, {len(caplog.records)} lines in all\n{text}")
    assert polls_during >= OUTAGE_S // 2, "the collector did not keep polling"
    assert not traced, [r.getMessage() for r in traced]
    assert len(records) <= MAX_LINES, text
    assert isinstance(pd, FakePagerDuty)
