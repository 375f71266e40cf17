"""Migration 0009 on a database filled by the release before it (schema 0008), on PostgreSQL and SQLite: the rows of
the three transition tables arrive in the one ``transitions`` table with their source, read the same through the
timeline and the anomaly query, and the tail resumes its reported anomalies; downgrade brings the three tables back
with the same rows, and upgrading again gives the same answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from txnwatch.core.epoch import to_ms
from txnwatch.store import models as m
from txnwatch.store import queries, txnlog_queries
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store.archive import MOVED_LOG_ID_SHIFT
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import current, downgrade, upgrade

NOW = datetime(2026, 11, 26, 12, 0, 0, 123000, tzinfo=UTC)
_TS = sa.DateTime(timezone=True)


def _table(name: str, *columns: tuple[str, Any]) -> sa.TableClause:
    """The release-0008 table as its SQL saw it (no dependency on today's models)."""
    return sa.table(name, *(sa.column(c, t) for c, t in columns))


CLUSTERS = _table("clusters", ("id", sa.Integer), ("name", sa.String), ("bootstrap_servers", sa.Text),
                  ("up", sa.Boolean), ("created_at", _TS))
_COMMON = (("cluster_id", sa.Integer), ("transactional_id", sa.Text), ("from_state", sa.String),
           ("to_state", sa.String), ("producer_id", sa.BigInteger), ("producer_epoch", sa.Integer),
           ("prev_producer_id", sa.BigInteger), ("prev_producer_epoch", sa.Integer), ("timeout_ms", sa.BigInteger),
           ("duration_ms", sa.BigInteger))
POLLED = _table("txn_transitions", ("id", sa.Integer), *_COMMON, ("observed_at", _TS), ("txn_started_at", _TS),
                ("partitions", sa.JSON), ("events", sa.JSON))
STREAM = _table("txnlog_stream", ("id", sa.Integer), *_COMMON, ("log_partition", sa.Integer),
                ("log_offset", sa.BigInteger), ("at_ms", sa.BigInteger), ("staged_at_ms", sa.BigInteger),
                ("start_ms", sa.BigInteger), ("partitions", sa.Text), ("events", sa.Text),
                ("client_transaction_version", sa.Integer), ("detail", sa.Text))
ANOMALIES = _table("txnlog_anomalies", *_COMMON, ("at", _TS), ("kind", sa.String), ("events", sa.JSON),
                   ("txn_started_at", _TS), ("log_partition", sa.Integer), ("log_offset", sa.BigInteger),
                   ("detail", sa.Text))
LAG = _table("lag_samples", ("cluster_id", sa.Integer), ("group_id", sa.Text), ("topic", sa.String),
             ("partition", sa.Integer), ("sampled_at", _TS), ("committed_offset", sa.BigInteger),
             ("lag_hwm", sa.BigInteger), ("lag_lso", sa.BigInteger), ("lag_seconds", sa.Float))
TXN_IDS = _table("txn_ids", ("cluster_id", sa.Integer), ("source", sa.String), ("transactional_id", sa.Text),
                 ("id_hash", sa.String), ("state", sa.String), ("producer_id", sa.BigInteger),
                 ("producer_epoch", sa.Integer), ("timeout_ms", sa.BigInteger), ("partitions", sa.JSON),
                 ("first_seen_at", _TS), ("last_seen_at", _TS), ("last_update_at", _TS), ("superseded", sa.Boolean),
                 ("client_transaction_version", sa.Integer), ("log_partition", sa.Integer),
                 ("log_offset", sa.BigInteger), ("commits", sa.BigInteger), ("aborts", sa.BigInteger),
                 ("epoch_bumps", sa.BigInteger), ("fences", sa.BigInteger), ("timeout_aborts", sa.BigInteger))
NOW_MS = to_ms(NOW)


def _common(i: int, to_state: str) -> dict[str, Any]:
    return dict(cluster_id=1, transactional_id="app", from_state="Ongoing", to_state=to_state, producer_id=7,
                producer_epoch=i, prev_producer_id=7, prev_producer_epoch=i, timeout_ms=60_000, duration_ms=10 * i)


def _fill_release_0008(url: str) -> None:
    upgrade(url, "0008")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(CLUSTERS.insert(), [dict(id=1, name="c", bootstrap_servers="h:9092", up=True,
                                                  created_at=NOW)])
            # Polled transitions 1..3, seconds apart, one with two partitions and two events.
            conn.execute(POLLED.insert(), [dict(
                id=i, **_common(i, "CompleteCommit"), observed_at=NOW - timedelta(seconds=60 - i),
                txn_started_at=NOW - timedelta(seconds=61 - i), partitions=["orders-0", "orders-1"][:i % 2 + 1],
                events=["commit", "epoch_bump"][:i % 2 + 1]) for i in (1, 2, 3)])
            # The log's stream: ids 1..4 (the same ids as the polled rows: the two tables had two sequences).
            conn.execute(STREAM.insert(), [dict(
                id=i, **_common(i, "CompleteAbort" if i == 4 else "CompleteCommit"), log_partition=3,
                log_offset=100 + i, at_ms=NOW_MS - 30_000 + i, staged_at_ms=NOW_MS, start_ms=NOW_MS - 31_000,
                partitions="orders-0", events="fenced,abort" if i == 4 else "commit", client_transaction_version=2,
                detail=None) for i in (1, 2, 3, 4)])
            # Two anomalies: the fence of stream row 4 (the same partition and offset) and a stuck Prepare*.
            conn.execute(ANOMALIES.insert(), [
                dict(**_common(4, "CompleteAbort"), at=NOW - timedelta(seconds=20), kind="fenced",
                     events=["fenced", "abort"], txn_started_at=NOW - timedelta(seconds=31), log_partition=3,
                     log_offset=104, detail="a new producer instance"),
                dict(**_common(5, "PrepareCommit"), at=NOW - timedelta(seconds=10), kind="stuck_prepare",
                     events=["stuck_prepare"], txn_started_at=None, log_partition=3, log_offset=105, detail=None)])
            # The id's log row: still in the Prepare* the stuck_prepare anomaly reported (producer 7, epoch 5).
            conn.execute(TXN_IDS.insert(), [dict(
                cluster_id=1, source="transaction_log", transactional_id="app", id_hash=m.id_hash("app"),
                state="PrepareCommit", producer_id=7, producer_epoch=5, timeout_ms=60_000, partitions=["orders-0"],
                first_seen_at=NOW, last_seen_at=NOW, last_update_at=NOW, superseded=False,
                client_transaction_version=2, log_partition=3, log_offset=105, commits=3, aborts=1, epoch_bumps=1,
                fences=1, timeout_aborts=0)])
            conn.execute(LAG.insert(), [dict(cluster_id=1, group_id="g", topic="orders", partition=0, sampled_at=NOW,
                                             committed_offset=5, lag_hwm=2, lag_lso=1, lag_seconds=0.5)])
    finally:
        engine.dispose()


def test_upgrade_moves_every_row_and_downgrade_brings_them_back(db_url: str) -> None:
    _fill_release_0008(db_url)
    upgrade(db_url)
    _check_upgraded(db_url)
    downgrade(db_url, "0008")
    assert current(db_url) == "0008"
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            polled = conn.execute(sa.select(POLLED.c.id, POLLED.c.observed_at, POLLED.c.partitions, POLLED.c.events)
                                  .order_by(POLLED.c.id)).all()
            assert [(r.id, r.partitions, r.events) for r in polled] == [
                (1, ["orders-0", "orders-1"], ["commit", "epoch_bump"]), (2, ["orders-0"], ["commit"]),
                (3, ["orders-0", "orders-1"], ["commit", "epoch_bump"])]
            assert [_aware(r.observed_at) for r in polled] == [NOW - timedelta(seconds=60 - i) for i in (1, 2, 3)]
            stream = conn.execute(sa.select(STREAM.c.id, STREAM.c.log_offset, STREAM.c.events)
                                  .order_by(STREAM.c.id)).all()
            assert [tuple(r) for r in stream] == [(1, 101, "commit"), (2, 102, "commit"), (3, 103, "commit"),
                                                  (4, 104, "fenced,abort")]
            anomalies = conn.execute(sa.select(ANOMALIES.c.kind, ANOMALIES.c.log_offset, ANOMALIES.c.events,
                                               ANOMALIES.c.at).order_by(ANOMALIES.c.log_offset)).all()
            assert [(r.kind, r.log_offset, r.events) for r in anomalies] == [
                ("fenced", 104, ["fenced", "abort"]), ("stuck_prepare", 105, ["stuck_prepare"])]
            assert _aware(anomalies[0].at) == NOW - timedelta(seconds=20)
            assert "lag_records" not in {c["name"] for c in sa.inspect(conn).get_columns("lag_samples")}
    finally:
        engine.dispose()
    upgrade(db_url)  # and up again, with the rows
    _check_upgraded(db_url)


def _aware(at: datetime) -> datetime:
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at


def _check_upgraded(url: str) -> None:
    engine = make_engine(url)
    try:
        _check_rows(engine)
    finally:
        engine.dispose()


def _check_rows(engine: Engine) -> None:
    X = m.TransactionTransition
    with make_sessionmaker(engine)() as session:
        rows = list(session.scalars(sa.select(X).order_by(X.id)))
        assert [(r.source, r.anomaly) for r in rows] == [("poll", None)] * 3 + [("transaction_log", None)] * 4 + [
            ("transaction_log", "fenced"), ("transaction_log", "stuck_prepare")]
        # Polled rows keep their ids (the archive's rows carry them); the stream's move up by the shift.
        assert [r.id for r in rows[:7]] == [1, 2, 3] + [MOVED_LOG_ID_SHIFT + i for i in (1, 2, 3, 4)]
        assert all(r.id > MOVED_LOG_ID_SHIFT + 4 for r in rows[7:])
        assert [(r.at_ms, r.staged_at_ms, r.start_ms, r.partitions, r.events) for r in rows[:3]] == [
            (NOW_MS - (60 - i) * 1000, NOW_MS - (60 - i) * 1000, NOW_MS - (61 - i) * 1000,
             "orders-0,orders-1" if i % 2 else "orders-0", "commit,epoch_bump" if i % 2 else "commit")
            for i in (1, 2, 3)]
        fence = rows[7]
        assert (fence.at_ms, fence.start_ms, fence.events, fence.log_partition, fence.log_offset, fence.detail) == (
            NOW_MS - 20_000, NOW_MS - 31_000, "fenced,abort", 3, 104, "a new producer instance")
        # The timeline: the 3 polled and 4 logged transitions, newest first; no anomaly twice.
        timeline = txnlog_queries.timeline(session, 1, "c", "app", 100, None)
        assert [(t.to_state, t.log_offset) for t in timeline] == [
            ("CompleteAbort", 104), ("CompleteCommit", 103), ("CompleteCommit", 102), ("CompleteCommit", 101),
            ("CompleteCommit", None), ("CompleteCommit", None), ("CompleteCommit", None)]
        assert timeline[0].events == ("fenced", "abort") and timeline[0].at_ms == NOW_MS - 30_000 + 4
        assert [a.anomaly for a in txnlog_queries.anomalies(session, 1, None, (), 10)] == ["stuck_prepare", "fenced"]
        # The tail resumes knowing it already reported the stuck Prepare* (not again after the upgrade).
        assert store_txnlog.load(session, 1).state.reported == frozenset({("app", 7, 5, "stuck_prepare")})
        assert queries.group_partitions(session, 1, "g")[0].lag_records is None
