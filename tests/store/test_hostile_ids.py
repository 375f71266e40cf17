"""Tenants' ids are untrusted and unbounded (issue 23 item 1): the store keeps any id Kafka accepts, and a row the
database still refuses costs that row only, never every tenant's history from then on."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from sqlalchemy import Engine, func, select

from txnwatch.core.findings import Findings, GroupLag
from txnwatch.core.model import ClusterSnapshot, PartitionSnapshot, TopicPartition, TransactionDescription, TxnState
from txnwatch.store import models as m
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.recorder import Recorder

TP = TopicPartition("orders", 0)
T0 = 1_700_000_000_000
#: Kafka's limit for a transactional id or a group id: a Java String serialised with a 16-bit length.
KAFKA_MAX = 32_767
POLLS = 3


def _utf8_id(n_bytes: int, head: str) -> str:
    """An id of exactly ``n_bytes`` UTF-8 bytes, multi-byte characters included (Kafka counts bytes)."""
    body = head + "é" * ((n_bytes - len(head.encode())) // 2)
    return body + "x" * (n_bytes - len(body.encode()))


def _poll(at_ms: int, txn_ids: list[str], groups: list[str]) -> tuple[ClusterSnapshot, Findings]:
    snapshot = ClusterSnapshot(
        cluster="c", taken_at_ms=at_ms, duration_ms=5,
        transactions={t: TransactionDescription(t, 1, TxnState.ONGOING, 7 + i, 1, 60_000, at_ms - 1000,
                                                frozenset({TP})) for i, t in enumerate(txn_ids)},
        partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=10, last_stable_offset=5, log_start_offset=0)})
    findings = Findings(cluster="c", now_ms=at_ms,
                        lags=tuple(GroupLag("c", g, TP, 3, 7, 2, 1.5) for g in groups))
    return snapshot, findings


def _count(engine: Engine, stmt: Any) -> int:
    with make_sessionmaker(engine)() as s:
        return int(s.scalar(stmt) or 0)


def _record(engine: Engine, txn_ids: list[str], groups: list[str]) -> Recorder:
    rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"})
    rec.start()
    for i in range(POLLS):
        snapshot, findings = _poll(T0 + i * 5_000, txn_ids, groups)
        rec.on_poll("c", snapshot, findings, None, T0 + i * 5_000)
        assert rec.buffered == 0, f"poll {i} is still waiting in memory: {rec.health.error}"
        assert rec.health.ok
    return rec


@pytest.mark.parametrize(("long_txn", "long_group"), [
    pytest.param("t" * 300, "g" * 300, id="300-chars: over the old VARCHAR(255) of groups"),
    pytest.param(_utf8_id(KAFKA_MAX, "txn-"), _utf8_id(KAFKA_MAX, "group-"), id="32767-bytes: Kafka's own limit"),
])
def test_long_ids_are_stored_whole_and_others_keep_being_recorded(engine: Engine, long_txn: str,
                                                                  long_group: str) -> None:
    _record(engine, ["app-1", long_txn, "app-2"], ["g1", long_group, "g2"])
    L, S, P = m.ConsumerLagSample, m.TransactionState, m.Poll
    assert _count(engine, select(func.count()).select_from(P)) == POLLS
    for group in ("g1", "g2", long_group):  # every poll's rows, every tenant
        assert _count(engine, select(func.count()).select_from(L).where(L.group_id == group)) == POLLS, group[:20]
    with make_sessionmaker(engine)() as s:
        ids = set(s.scalars(select(S.transactional_id).where(S.gone_at.is_(None))))
        groups = set(s.scalars(select(L.group_id)))
    assert ids == {"app-1", "app-2", long_txn}
    assert long_group in groups  # the full value, not a truncated one


def test_the_long_ids_are_kafkas_limits() -> None:
    assert len(_utf8_id(KAFKA_MAX, "txn-").encode()) == len(_utf8_id(KAFKA_MAX, "group-").encode()) == KAFKA_MAX


def test_a_refused_row_is_set_aside_counted_and_the_rest_recorded(engine: Engine) -> None:
    """A NUL character: Kafka takes it in an id, PostgreSQL text cannot hold it (SQLite can). Whatever the
    database refuses is set aside row by row; the store stays healthy (/readyz) and counts what it refused."""
    bad = "tenant\x00evil"
    rec = _record(engine, ["app-1", bad, "app-2"], ["g1", bad, "g2"])
    L, S = m.ConsumerLagSample, m.TransactionState
    for group in ("g1", "g2"):
        assert _count(engine, select(func.count()).select_from(L).where(L.group_id == group)) == POLLS
    with make_sessionmaker(engine)() as s:
        ids = set(s.scalars(select(S.transactional_id)))
    registry = CollectorRegistry()
    registry.register(rec.health)
    rejected = {(sample.labels["kind"], sample.labels["reason"]): sample.value
                for family in registry.collect() if family.name == "txnwatch_store_rejected_objects"
                for sample in family.samples if sample.name.endswith("_total")}
    if engine.dialect.name == "postgresql":
        assert ids == {"app-1", "app-2"}
        # one lag row and one id per poll; the reason is the driver's own error class
        assert rejected == {("lag_samples", "DataError"): POLLS, ("txn_ids", "DataError"): POLLS}
    else:
        assert ids == {"app-1", "app-2", bad}
        assert rejected == {}


def test_the_log_tail_sets_a_refused_id_aside_and_keeps_going(engine: Engine) -> None:
    """The same for the transaction-log tail: its batch (positions, counters, ids, stream) commits without the
    refused id's rows, so the tail never retries a poisoned batch forever."""
    import random

    from tests.store.test_one_history import _committed_log
    from tests.store.test_txnlog_tail import FakeTail, registered
    from txnwatch.collect.txnlog_tail import ClusterTail, cluster_id_for
    from txnwatch.core.views import LatestState
    from txnwatch.store import txnlog as store_txnlog
    from txnwatch.store.health import StoreHealth

    bad = "tenant\x00evil"
    log = _committed_log(("app-1", bad, "app-2"))
    sessions = registered(engine)
    health = StoreHealth()
    tail = ClusterTail("c", "h", lambda p: FakeTail(log, p, random.Random(5)), sessions, LatestState(["c"]),
                       read_timeout_ms=0, health=health)
    for _ in range(40):
        tail.step()
    with sessions() as session:
        resumed = store_txnlog.load(session, cluster_id_for(sessions, "c"))
    assert resumed.positions == {0: len(log[0])}  # every record read and committed
    assert resumed.counters["records"] == len(log[0])
    if engine.dialect.name == "postgresql":
        assert set(resumed.state.ids) == {"app-1", "app-2"}
        assert sum(health.rejected_objects.values()) >= 1
        assert set(health.rejected_objects) == {("transaction_log_id", "DataError")}
    else:
        assert set(resumed.state.ids) == {"app-1", bad, "app-2"}
        assert health.rejected_objects == {}
