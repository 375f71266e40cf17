"""The recorder writes polls idempotently and rides out database outages within its bound."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from tests.fixtures.postgres_server import start_postgres
from txnwatch.core.model import (
    ClusterSnapshot,
    PartitionSnapshot,
    ProducerState,
    TopicPartition,
    TransactionDescription,
    TxnState,
)
from txnwatch.store import models as m
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import upgrade
from txnwatch.store.recorder import Recorder

TP = TopicPartition("orders", 0)


def snapshot(at_ms: int, txn_ids: tuple[str, ...] = ("app-1",), hwm: int = 10) -> ClusterSnapshot:
    open_producer = ProducerState(producer_id=7, producer_epoch=1, last_sequence=3, last_timestamp_ms=at_ms,
                                  coordinator_epoch=0, current_txn_start_offset=5)
    return ClusterSnapshot(
        cluster="c", taken_at_ms=at_ms, duration_ms=12,
        transactions={t: TransactionDescription(t, 1, TxnState.ONGOING, 7, 1, 60_000, at_ms - 1000, frozenset({TP}))
                      for t in txn_ids},
        partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=hwm, last_stable_offset=5, log_start_offset=0,
                                          producers=(open_producer,))},
    )


def scalar(engine: Engine, stmt) -> object:
    with make_sessionmaker(engine)() as s:
        return s.scalar(stmt)


def test_polls_become_history_and_current_state(engine: Engine) -> None:
    rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"})
    rec.start()
    rec.on_poll("c", snapshot(1_700_000_000_000, ("app-1", "app-2")), None, None, 0)
    rec.on_poll("c", snapshot(1_700_000_015_000, ("app-1",), hwm=12), None, None, 0)
    rec.on_poll("c", None, None, "ConnectionError: down", 1_700_000_030_000)
    assert scalar(engine, select(func.count()).select_from(m.Poll)) == 3
    assert scalar(engine, select(func.count()).select_from(m.PartitionOffsetSample)) == 2
    assert scalar(engine, select(m.PartitionOffsetSample.open_transactions).limit(1)) == 1
    assert scalar(engine, select(func.count()).select_from(m.TransactionState)) == 2
    assert scalar(engine, select(m.TransactionState.gone_at).where(m.TransactionState.transactional_id == "app-2")) is not None
    first = scalar(engine, select(m.TransactionState.first_seen_at).where(m.TransactionState.transactional_id == "app-1"))
    last = scalar(engine, select(m.TransactionState.last_seen_at).where(m.TransactionState.transactional_id == "app-1"))
    assert first < last  # type: ignore[operator]  # both timestamps are set by then
    cluster = make_sessionmaker(engine)().scalars(select(m.Cluster)).one()
    assert not cluster.up and cluster.last_error == "ConnectionError: down" and cluster.last_success_at is not None


@pytest.mark.postgres
def test_database_outage_buffers_then_writes_in_order_and_counts_drops() -> None:
    server = start_postgres()
    try:
        url = server.create_database("outage")
        upgrade(url)
        engine = make_engine(url, pool_size=1, max_overflow=0)
        rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"}, max_buffered=3)
        rec.start()
        health = rec.health
        rec.on_poll("c", snapshot(1_700_000_000_000), None, None, 0)
        server.stop(mode="fast")
        for i in range(1, 6):
            rec.on_poll("c", snapshot(1_700_000_000_000 + i * 1000, hwm=10 + i), None, None, 0)
        assert not health.ok and health.error
        assert rec.buffered == 3 and health.dropped_observations == 2
        server.start_existing()
        assert rec.flush(), health.error
        assert health.ok and health.error is None and rec.buffered == 0
        hwms = list(make_sessionmaker(engine)().scalars(
            select(m.PartitionOffsetSample.high_watermark).order_by(m.PartitionOffsetSample.sampled_at)))
        assert hwms == [10, 13, 14, 15]
        engine.dispose()
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)


def _state_rows_written(engine: Engine) -> list[int]:
    """Rows sent per INSERT into txn_ids (an executemany counts its parameter sets)."""
    from sqlalchemy import event

    written: list[int] = []

    def count(conn: object, cursor: object, statement: str, parameters: Any, context: object,
              executemany: bool) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO TXN_IDS"):
            written.append(len(parameters) if executemany else 1)

    event.listen(engine, "before_cursor_execute", count)
    return written


def _steady(at_ms: int, ids: tuple[str, ...], **changes: TxnState) -> ClusterSnapshot:
    """A poll where each id's transaction started at the same time as in every other poll (unchanged)."""
    from dataclasses import replace

    polled = snapshot(at_ms, ids)
    return replace(polled, transactions={t: replace(d, start_time_ms=1_600_000_000_000, state=changes.get(t, d.state))
                                         for t, d in polled.transactions.items()})


def test_txn_states_written_as_a_difference(engine: Engine) -> None:
    """Unchanged ids are stamped seen by one UPDATE, only new or changed ids are upserted; an id that was gone
    and comes back unchanged is upserted again (its row says gone: the difference is taken against the database)."""
    rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"})
    rec.start()
    written = _state_rows_written(engine)
    t0 = 1_700_000_000_000
    ids = ("app-1", "app-2", "app-3")
    rec.on_poll("c", _steady(t0, ids), None, None, 0)
    assert sum(written) == 3
    written.clear()
    rec.on_poll("c", _steady(t0 + 15_000, ids), None, None, 0)  # nothing changed
    assert sum(written) == 0
    with make_sessionmaker(engine)() as s:
        rows = {r.transactional_id: r for r in s.scalars(select(m.TransactionState))}
    assert set(rows) == set(ids)
    assert all(r.last_seen_at.timestamp() * 1000 == t0 + 15_000 and r.gone_at is None for r in rows.values())

    rec.on_poll("c", _steady(t0 + 30_000, ("app-1", "app-2"), **{"app-2": TxnState.PREPARE_COMMIT}), None, None, 0)
    assert sum(written) == 1  # app-2 only; app-3 is marked gone by the bulk update
    with make_sessionmaker(engine)() as s:
        rows = {r.transactional_id: r for r in s.scalars(select(m.TransactionState))}
    assert rows["app-2"].state == TxnState.PREPARE_COMMIT.value
    assert rows["app-3"].gone_at is not None and rows["app-1"].gone_at is None
    assert rows["app-3"].last_seen_at.timestamp() * 1000 == t0 + 15_000
    assert rows["app-1"].first_seen_at.timestamp() * 1000 == t0
    assert rows["app-1"].last_seen_at.timestamp() * 1000 == t0 + 30_000

    written.clear()
    rec.on_poll("c", _steady(t0 + 45_000, ids, **{"app-2": TxnState.PREPARE_COMMIT}), None, None, 0)
    assert sum(written) == 1  # app-3 again: same content as before it went, but its row says gone
    with make_sessionmaker(engine)() as s:
        rows = {r.transactional_id: r for r in s.scalars(select(m.TransactionState))}
    assert all(r.gone_at is None for r in rows.values())
    assert {r.last_seen_at.timestamp() * 1000 for r in rows.values()} == {t0 + 45_000}


def test_open_episodes_refreshed_in_one_statement(engine: Engine) -> None:
    """Every open LSO stall is refreshed each poll: one executemany, not an ORM UPDATE per episode (which
    re-evaluated its criteria against all loaded episodes); started_at keeps its first value."""
    from datetime import datetime, timedelta, timezone

    from sqlalchemy import event

    from txnwatch.store.findings import EpisodeSync, sync_episodes

    rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"})
    rec.start()
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)

    def stalls(at: datetime, gap: int) -> EpisodeSync:
        return EpisodeSync(m.LsoStallEpisode, {f"orders-{p}": dict(
            topic="orders", partition=p, started_at=at, last_seen_at=at, stalled_lso=5, max_gap=gap,
            blocking_producer_id=7, blocking_producer_epoch=0, blocking_transactional_id="app-1") for p in range(5)})

    sessions = make_sessionmaker(engine)
    with sessions.begin() as s:
        cluster_id = s.scalar(select(m.Cluster.id))
        assert cluster_id is not None
        sync_episodes(s, cluster_id, stalls(t0, 10), t0)
    updates: list[str] = []

    def count(conn: object, cursor: object, statement: str, parameters: Any, context: object,
              executemany: bool) -> None:
        if statement.lstrip().upper().startswith("UPDATE LSO_STALLS"):
            updates.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    later = t0 + timedelta(seconds=15)
    with sessions.begin() as s:
        sync_episodes(s, cluster_id, stalls(later, 20), later)
    assert len(updates) == 1
    with sessions() as s:
        rows = s.scalars(select(m.LsoStallEpisode)).all()
    assert len(rows) == 5 and {r.max_gap for r in rows} == {20} and {r.started_at for r in rows} == {t0}
    assert {r.last_seen_at for r in rows} == {later} and all(r.ended_at is None for r in rows)
