"""Issue 24's done-when check on a real lab cluster in exact mode: a transactional id shows the same state in
``/api/v1/transactions``, ``/api/v1/transactions/{cluster}/{id}``, the console page and ``/metrics``.

The producer holds each phase (open, committed, open, aborted) several poll intervals; each phase is sampled
once every reader has had time to see it (the database within the tail's fetch wait and commit, ~2.5 s;
/metrics within a render, i.e. a poll), and every sample of every reader must agree.
"""

from __future__ import annotations

import html
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from tests.e2e.test_txnlog_history import metric, run_daemon  # noqa: F401  # run_daemon is a fixture
from tests.fixtures.daemon import Daemon, wait_for
from txnwatch.lab.faults import transactional_producer, unique_transactional_id

pytestmark = pytest.mark.lab

POLL_S = 2  # run_daemon's poll interval
OPEN = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
_CONSOLE_STATE = re.compile(r"<dt>state now</dt><dd><strong>([^<]*)</strong>")


def _listed(d: Daemon, tid: str) -> str | None:
    items = d.get("/api/v1/transactions", params={"id_prefix": tid, "include_gone": "true"}).json()["items"]
    assert len(items) <= 1, items
    return items[0]["state"] if items else None


def _sample(d: Daemon, cluster: str, tid: str) -> dict[str, Any]:
    """One moment as the four readers show it: the list is read before and after the other three, and a
    sample is taken again when it changed in between (the coordinator moved the id while the four requests
    ran: on a loaded machine a phase may outlive the transaction's timeout), so readers are compared only
    over a moment in which the id did not move."""
    for _ in range(5):
        before = _listed(d, tid)
        detail = d.get(f"/api/v1/transactions/{cluster}/{tid}").json()
        page = d.get(f"/console/transactions/{cluster}/{tid}").text
        console = _CONSOLE_STATE.search(page)
        families = [s for s in _age_series(d) if s.labels.get("transactional_id") == tid]
        listed = _listed(d, tid)
        if listed == before:
            break
    return dict(list=listed, detail=detail["state"], detail_source=detail["source"],
                console=html.unescape(console.group(1)) if console else None,
                metrics=families[0].labels["state"] if families else None)


def _age_series(d: Daemon) -> list[Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return [s for f in text_string_to_metric_families(d.get("/metrics").text)
            if f.name == "txnwatch_transaction_age_seconds" for s in f.samples]


def test_list_detail_console_and_metrics_show_one_state(run_daemon: Callable[[str], Daemon],
                                                        lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    cluster = f"view-{uuid.uuid4().hex[:6]}"
    daemon = run_daemon(cluster)
    topic = new_topic(partitions=1, replication=1)
    tid = unique_transactional_id("e2e-view")
    producer = transactional_producer(lab_cluster.bootstrap_servers, tid, lab_cluster.transaction_max_timeout_ms)
    samples: list[dict[str, Any]] = []

    def phase(expected: str) -> None:
        wait_for(lambda: _listed(daemon, tid) == expected, 30, interval=0.2, what=f"the list to show {expected}")
        time.sleep(2 * POLL_S + 0.5)  # a poll and a render after the log's commit
        for _ in range(4):
            s = _sample(daemon, cluster, tid)
            samples.append(s)
            in_metrics = expected if expected in OPEN else None  # /metrics has series for open ones only
            assert (s["list"], s["detail"], s["console"], s["metrics"]) == (expected, expected, expected,
                                                                             in_metrics), s
            assert s["detail_source"] == "transaction_log"  # exact mode: the log's row is the one shown
            time.sleep(0.4)

    try:
        producer.begin_transaction()
        producer.send(topic, b"one")
        producer.flush()
        phase("Ongoing")
        producer.commit_transaction()
        phase("CompleteCommit")
        producer.begin_transaction()
        producer.send(topic, b"two")
        producer.flush()
        phase("Ongoing")
        producer.abort_transaction()
        phase("CompleteAbort")
    finally:
        producer.close(timeout=5)
    assert [s["metrics"] for s in samples] == ["Ongoing"] * 4 + [None] * 4 + ["Ongoing"] * 4 + [None] * 4
    assert metric(daemon, "txnwatch_history_mode", cluster=cluster, mode="exact") == 1
