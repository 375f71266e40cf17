"""The daemon end to end on a real lab cluster and real PostgreSQL: poll → store → REST."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.fixtures.daemon import Daemon, free_port, start_daemon, wait_for
from txnwatch.lab.faults import transactional_producer, unique_transactional_id

pytestmark = pytest.mark.lab


@pytest.fixture
def daemon(lab_cluster: Any, postgres_url: str) -> Iterator[Daemon]:
    from txnwatch.store.migrate import upgrade

    upgrade(postgres_url)
    d = start_daemon(database_url=postgres_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)])
    try:
        yield d
    finally:
        d.stop()


def partition_row(d: Daemon, topic: str, partition: int) -> dict[str, Any] | None:
    items = d.get("/api/v1/partitions", params={"cluster": "lab", "topic": topic}).json()["items"]
    return next((p for p in items if p["partition"] == partition), None)


def test_open_transaction_seen_then_committed(daemon: Daemon, lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    txn_id = unique_transactional_id("e2e-open")
    producer = transactional_producer(lab_cluster.bootstrap_servers, txn_id, 10_000)
    try:
        producer.begin_transaction()
        for _ in range(5):
            producer.send(topic, value=b"x", partition=1)
        producer.flush()

        def ongoing() -> dict[str, Any] | None:
            r = daemon.get(f"/api/v1/transactions/lab/{txn_id}")
            return r.json() if r.status_code == 200 and r.json()["state"] == "Ongoing" else None

        txn = wait_for(ongoing, 30, what="the open transaction in the API")
        assert f"{topic}-1" in txn["partitions"]
        # A poll may catch the records appended but not yet replicated (HWM not moved): wait for the open
        # transaction to pin the LSO below a high watermark that has moved past it.
        row = wait_for(lambda: (p := partition_row(daemon, topic, 1)) and p["open_transactions"] == 1
                       and p["high_watermark"] >= 5 and p, 30, what="the open transaction on the partition")
        assert row["last_stable_offset"] < row["high_watermark"]
        producer.commit_transaction()
        row = wait_for(lambda: (p := partition_row(daemon, topic, 1)) and p["open_transactions"] == 0 and p,
                       30, what="the LSO to catch up after commit")
        assert row["last_stable_offset"] == row["high_watermark"]
        assert daemon.get("/readyz").status_code == 200
    finally:
        producer.close(timeout=5)


def test_unreachable_cluster_keeps_serving_and_readyz_says_why(postgres_url: str) -> None:
    from txnwatch.store.migrate import upgrade

    upgrade(postgres_url)
    dead = f"127.0.0.1:{free_port()}"
    d = start_daemon(database_url=postgres_url, poll_interval_seconds=1,
                     clusters=[dict(name="gone", bootstrap_servers=dead, request_timeout_ms=1000)])
    try:
        body = wait_for(lambda: (r := d.get("/api/v1/clusters")).status_code == 200
                        and r.json() and r.json()[0].get("last_error") and r.json(), 30, what="a poll failure")
        assert body[0]["up"] is False
        ready = d.get("/readyz")
        assert ready.status_code == 503
        assert any("gone" in reason for reason in ready.json()["reasons"])
        assert d.get("/healthz").status_code == 200
    finally:
        d.stop()
