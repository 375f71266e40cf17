"""Exact coordinator history on a real lab cluster: the daemon tails __transaction_state.

The scenario is built so the truth is known by construction (kafka-python producers,
which speak the transaction-version-1 protocol): commits, own aborts, one fence by a
second instance.  Counts must match exactly, across a daemon restart too.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, select

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.lab.faults import transactional_producer, unique_transactional_id
from txnwatch.store import models as m

pytestmark = pytest.mark.lab


def metric(d: Daemon, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(d.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


def history(d: Daemon, cluster: str, tid: str) -> dict[str, Any] | None:
    r = d.get(f"/api/v1/transactions/{cluster}/{tid}", params={"timeline_limit": 1000})
    return r.json() if r.status_code == 200 and r.json().get("history") else None


@pytest.fixture
def run_daemon(lab_cluster: Any, postgres_url: str) -> Iterator[Callable[[str], Daemon]]:
    from txnwatch.store.migrate import upgrade

    upgrade(postgres_url)
    started: list[Daemon] = []

    def start(cluster: str) -> Daemon:
        d = start_daemon(database_url=postgres_url, poll_interval_seconds=2,
                         clusters=[dict(name=cluster, bootstrap_servers=lab_cluster.bootstrap_servers)])
        started.append(d)
        wait_for(lambda: metric(d, "txnwatch_history_mode", cluster=cluster, mode="exact") == 1, 60,
                 what="exact history mode")
        return d

    try:
        yield start
    finally:
        for d in started:
            d.stop()


def commit_events(postgres_url: str, cluster: str) -> int:
    engine = create_engine(postgres_url.replace("postgresql://", "postgresql+psycopg://", 1)
                           if postgres_url.startswith("postgresql://") else postgres_url)
    try:
        with engine.connect() as conn:
            X = m.TransactionTransition
            rows = conn.execute(select(X.events).join(m.Cluster, m.Cluster.id == X.cluster_id)
                                .where(m.Cluster.name == cluster, X.source == m.TRANSACTION_LOG,
                                       X.anomaly.is_(None))).scalars()
            return sum(1 for events in rows if "commit" in events.split(","))
    finally:
        engine.dispose()


def test_commits_aborts_and_a_fence_are_exact(run_daemon: Callable[[str], Daemon], lab_cluster: Any,
                                              new_topic: Callable[..., str], postgres_url: str) -> None:
    cluster = f"log-{uuid.uuid4().hex[:6]}"
    daemon = run_daemon(cluster)
    topic = new_topic(partitions=2, replication=1)
    tid = unique_transactional_id("e2e-log")
    first = transactional_producer(lab_cluster.bootstrap_servers, tid, 10_000)
    for i in range(7):
        first.begin_transaction()
        first.send(topic, b"v", partition=i % 2)
        first.flush()
        if i in (2, 4):
            first.abort_transaction()
        else:
            first.commit_transaction()
    first.begin_transaction()
    first.send(topic, b"open", partition=0)
    first.flush()
    second = transactional_producer(lab_cluster.bootstrap_servers, tid, 10_000)  # fences the open one
    try:
        for _ in range(3):
            second.begin_transaction()
            second.send(topic, b"w", partition=1)
            second.commit_transaction()
    finally:
        second.close(timeout=5)
        first.close(timeout=1)

    got = wait_for(lambda: (h := history(daemon, cluster, tid)) and h["history"]["commits"] >= 8 and h, 60,
                   what="eight commits in the log-derived history")
    h = got["history"]
    assert (h["commits"], h["aborts"], h["fences"], h["timeout_aborts"]) == (8, 3, 1, 0)
    assert h["epoch_bumps"] == 2  # the fence's bump, then the new instance's InitProducerId
    timeline = got["timeline"]
    assert all(t["log_offset"] is not None for t in timeline)
    assert sum("commit" in t["events"] for t in timeline) == 8
    assert sum("fenced" in t["events"] for t in timeline) == 1
    offsets = [t["log_offset"] for t in timeline]
    assert offsets == sorted(offsets, reverse=True)  # one coordinator partition: newest first
    assert got["state"] == "CompleteCommit"
    wait_for(lambda: metric(daemon, "txnwatch_transaction_commits_total", cluster=cluster)
             == commit_events(postgres_url, cluster), 30, what="the commit counter to equal the stored stream")
    assert (metric(daemon, "txnwatch_producer_fencings_total", cluster=cluster) or 0) >= 1


def test_restart_mid_stream_neither_loses_nor_double_counts(run_daemon: Callable[[str], Daemon], lab_cluster: Any,
                                                            new_topic: Callable[..., str], postgres_url: str) -> None:
    cluster = f"log-{uuid.uuid4().hex[:6]}"
    daemon = run_daemon(cluster)
    topic = new_topic(partitions=1, replication=1)
    tid = unique_transactional_id("e2e-restart")
    total = 40
    done = threading.Event()

    def produce() -> None:
        producer = transactional_producer(lab_cluster.bootstrap_servers, tid, 10_000)
        try:
            for _ in range(total):
                producer.begin_transaction()
                producer.send(topic, b"v")
                producer.commit_transaction()
        finally:
            producer.close(timeout=5)
            done.set()

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    wait_for(lambda: (h := history(daemon, cluster, tid)) and h["history"]["commits"] >= 5, 60,
             what="the first commits")
    daemon.stop()
    daemon.runtime.stop()
    restarted = run_daemon(cluster)
    assert done.wait(120)
    got = wait_for(lambda: (h := history(restarted, cluster, tid)) and h["history"]["commits"] >= total and h, 60,
                   what="all commits after the restart")
    assert got["history"]["commits"] == total
    assert sum("commit" in t["events"] for t in got["timeline"]) == total
    wait_for(lambda: metric(restarted, "txnwatch_transaction_commits_total", cluster=cluster)
             == commit_events(postgres_url, cluster), 30, what="the commit counter to equal the stored stream")
