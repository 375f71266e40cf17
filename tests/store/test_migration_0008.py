"""Migration 0008 on a database filled by the release before it (schema 0007), on PostgreSQL and SQLite: every
id-state row arrives in ``txn_ids`` with its source, reads the same through the API's queries, and the tail resumes
from the log's rows; downgrade brings the old tables back with the same rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from txnwatch.core.model import TxnState
from txnwatch.store import models as m
from txnwatch.store import queries, rollups
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import current, downgrade, upgrade

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
_TS = sa.DateTime(timezone=True)


def _table(name: str, *columns: tuple[str, Any]) -> sa.TableClause:
    """The release-0007 table as its SQL saw it (lightweight: no dependency on today's models)."""
    return sa.table(name, *(sa.column(c, t) for c, t in columns))


CLUSTERS = _table("clusters", ("id", sa.Integer), ("name", sa.String), ("bootstrap_servers", sa.Text),
                  ("up", sa.Boolean), ("created_at", _TS))
TXN_STATES = _table("txn_states", ("cluster_id", sa.Integer), ("transactional_id", sa.String),
                    ("coordinator_id", sa.Integer), ("state", sa.String), ("producer_id", sa.BigInteger),
                    ("producer_epoch", sa.Integer), ("timeout_ms", sa.BigInteger), ("txn_started_at", _TS),
                    ("partitions", sa.JSON), ("first_seen_at", _TS), ("last_seen_at", _TS), ("gone_at", _TS))
TXNLOG_IDS = _table("txnlog_ids", ("cluster_id", sa.Integer), ("transactional_id", sa.String), ("state", sa.String),
                    ("producer_id", sa.BigInteger), ("producer_epoch", sa.Integer), ("timeout_ms", sa.BigInteger),
                    ("txn_started_at", _TS), ("last_update_at", _TS), ("partitions", sa.JSON),
                    ("client_transaction_version", sa.Integer), ("client_tv", sa.Integer),
                    ("abort_origin", sa.String), ("log_partition", sa.Integer), ("log_offset", sa.BigInteger),
                    ("commits", sa.BigInteger), ("aborts", sa.BigInteger), ("epoch_bumps", sa.BigInteger),
                    ("fences", sa.BigInteger), ("timeout_aborts", sa.BigInteger))
LAG = _table("lag_samples", ("cluster_id", sa.Integer), ("group_id", sa.String), ("topic", sa.String),
             ("partition", sa.Integer), ("sampled_at", _TS), ("committed_offset", sa.BigInteger),
             ("lag_hwm", sa.BigInteger), ("lag_lso", sa.BigInteger), ("lag_seconds", sa.Float))
ROLLUP_LAG = _table("rollup_lag", ("cluster", sa.String), ("period", sa.String), ("period_start", _TS),
                    ("computed_at", _TS), ("group_id", sa.String), ("topic", sa.String), ("samples", sa.BigInteger),
                    ("lag_lso_max", sa.BigInteger))
ROLLUP_TXNS = _table("rollup_transactions", ("cluster", sa.String), ("period", sa.String), ("period_start", _TS),
                     ("computed_at", _TS), ("txn_prefix", sa.String), ("topic", sa.String),
                     ("txn_count", sa.BigInteger), ("commits", sa.BigInteger), ("aborts", sa.BigInteger),
                     ("timeout_aborts", sa.BigInteger), ("fences", sa.BigInteger))
OFFENDERS = _table("rollup_offenders", ("cluster", sa.String), ("period", sa.String), ("period_start", _TS),
                   ("computed_at", _TS), ("kind", sa.String), ("rank", sa.Integer), ("subject", sa.String),
                   ("value", sa.Float))
#: The longest ids release 0007's rollup columns held.
LONG_GROUP, LONG_PREFIX, LONG_SUBJECT = "g" * 255, "p" * 512, "s" * 700
DAY = datetime(2026, 11, 25, tzinfo=UTC)

POLLED = 40  # ids only polling saw (one gone), the first LOGGED of them also in the log
LOGGED = 25


def _fill_release_0007(url: str) -> None:
    upgrade(url, "0007")
    engine = make_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(CLUSTERS.insert(), [dict(id=1, name="c", bootstrap_servers="h:9092", up=True,
                                                  created_at=NOW)])
            conn.execute(TXN_STATES.insert(), [dict(
                cluster_id=1, transactional_id=f"app-{i:02d}", coordinator_id=i % 3,
                state=("Ongoing", "Empty", "PrepareCommit", "CompleteAbort")[i % 4], producer_id=1000 + i,
                producer_epoch=i % 5, timeout_ms=60_000,
                txn_started_at=NOW - timedelta(seconds=30 + i), partitions=[f"orders-{i % 3}"],
                first_seen_at=NOW - timedelta(hours=1), last_seen_at=NOW - timedelta(seconds=5),
                gone_at=NOW - timedelta(seconds=60) if i == POLLED - 1 else None) for i in range(POLLED)])
            conn.execute(TXNLOG_IDS.insert(), [dict(
                cluster_id=1, transactional_id=f"app-{i:02d}", state="CompleteCommit", producer_id=1000 + i,
                producer_epoch=i % 5 + 1, timeout_ms=60_000, txn_started_at=NOW - timedelta(seconds=20 + i),
                last_update_at=NOW - timedelta(seconds=10 + i), partitions=[], client_transaction_version=2,
                client_tv=2, abort_origin=None, log_partition=i % 50, log_offset=10 * i, commits=i, aborts=i // 5,
                epoch_bumps=i + i // 5, fences=i % 2, timeout_aborts=0) for i in range(LOGGED)])
            conn.execute(LAG.insert(), [dict(cluster_id=1, group_id=f"g-{i}", topic="orders", partition=0,
                                             sampled_at=NOW, committed_offset=5, lag_hwm=2, lag_lso=1,
                                             lag_seconds=0.5) for i in range(5)])
            conn.execute(ROLLUP_LAG.insert(), [dict(cluster="c", period="day", period_start=DAY, computed_at=NOW,
                                                    group_id=g, topic="orders", samples=3, lag_lso_max=n)
                                               for n, g in enumerate((LONG_GROUP, "g-0"))])
            conn.execute(ROLLUP_TXNS.insert(), [dict(cluster="c", period="day", period_start=DAY, computed_at=NOW,
                                                     txn_prefix=p, topic="*", txn_count=n, commits=n, aborts=0,
                                                     timeout_aborts=0, fences=0)
                                                for n, p in enumerate((LONG_PREFIX, "app"))])
            conn.execute(OFFENDERS.insert(), [dict(cluster="c", period="day", period_start=DAY, computed_at=NOW,
                                                   kind="lag_lso_max", rank=1, subject=LONG_SUBJECT, value=1.0)])
    finally:
        engine.dispose()


def test_upgrade_moves_every_row_and_reads_the_same(db_url: str) -> None:
    _fill_release_0007(db_url)
    upgrade(db_url)
    engine = make_engine(db_url)
    try:
        _check_upgraded(engine)
    finally:
        engine.dispose()
    downgrade(db_url, "0007")
    assert current(db_url) == "0007"
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.select(sa.func.count()).select_from(TXN_STATES)).scalar() == POLLED
            assert conn.execute(sa.select(sa.func.count()).select_from(TXNLOG_IDS)).scalar() == LOGGED
            assert conn.execute(sa.select(TXNLOG_IDS.c.commits).where(
                TXNLOG_IDS.c.transactional_id == "app-07")).scalar() == 7
            assert sorted(conn.execute(sa.select(ROLLUP_LAG.c.group_id, ROLLUP_LAG.c.lag_lso_max))) == [
                ("g-0", 1), (LONG_GROUP, 0)]
            assert sorted(conn.execute(sa.select(ROLLUP_TXNS.c.txn_prefix, ROLLUP_TXNS.c.txn_count))) == [
                ("app", 1), (LONG_PREFIX, 0)]
            assert conn.execute(sa.select(OFFENDERS.c.subject)).scalar() == LONG_SUBJECT
            assert "group_id_hash" not in {c["name"] for c in sa.inspect(conn).get_columns("rollup_lag")}
    finally:
        engine.dispose()
    upgrade(db_url)  # and up again, with the rows
    engine = make_engine(db_url)
    try:
        _check_upgraded(engine)
    finally:
        engine.dispose()


def _check_upgraded(engine: Engine) -> None:
    T = m.TransactionState
    sessions = make_sessionmaker(engine)
    with sessions() as session:
        rows = {(r.transactional_id, r.source): r for r in session.scalars(sa.select(T))}
        assert len(rows) == POLLED + LOGGED
        for i in range(POLLED):
            polled = rows[(f"app-{i:02d}", m.POLL)]
            assert (polled.state, polled.producer_epoch, polled.coordinator_id, polled.partitions) == (
                ("Ongoing", "Empty", "PrepareCommit", "CompleteAbort")[i % 4], i % 5, i % 3, [f"orders-{i % 3}"])
            assert polled.txn_started_at == NOW - timedelta(seconds=30 + i)
            assert polled.id_hash == m.id_hash(f"app-{i:02d}")  # the database's md5 is Python's
        for i in range(LOGGED):
            logged = rows[(f"app-{i:02d}", m.TRANSACTION_LOG)]
            assert (logged.state, logged.commits, logged.log_offset, logged.last_update_at) == (
                "CompleteCommit", i, 10 * i, NOW - timedelta(seconds=10 + i))
        # Through the API's queries: one row per id, the log's state where the log spoke, the poll's coordinator.
        listed = queries.list_transactions(session, queries.TxnFilter(clusters=("c",), include_gone=True),
                                           sort=queries.TxnSort.TRANSACTIONAL_ID, descending=False, after=None,
                                           limit=1000, now=NOW)
        assert [r.txn.transactional_id for r in listed] == [f"app-{i:02d}" for i in range(POLLED)]
        for r in listed:
            i = int(r.txn.transactional_id[4:])
            expected_state = "CompleteCommit" if i < LOGGED else ("Ongoing", "Empty", "PrepareCommit",
                                                                  "CompleteAbort")[i % 4]
            assert (r.txn.state, r.txn.coordinator_id) == (expected_state, i % 3)
            assert r.txn.first_seen_at == NOW - timedelta(hours=1)
            detail = queries.get_transaction(session, 1, r.txn.transactional_id)
            assert detail is not None and detail.txn._mapping == r.txn._mapping
        assert [g.group_id for g in queries.list_groups(session, ["c"], after=None, limit=10)] == [
            f"g-{i}" for i in range(5)]
        assert len(queries.group_partitions(session, 1, "g-3")) == 1
        # The tail resumes from the moved rows.
        resumed = store_txnlog.load(session, 1)
        assert len(resumed.state.ids) == LOGGED
        assert resumed.state.ids["app-07"].state is TxnState.COMPLETE_COMMIT
        assert resumed.state.ids["app-07"].commits == 7
        # The rollups, through the reports' queries, keyed by the hashes of their ids.
        until = DAY + timedelta(days=1)
        assert [(r.group_id, r.group_id_hash, r.lag_lso_max) for r in rollups.lag_rollups(session, "c", DAY, until)] == [
            ("g-0", m.id_hash("g-0"), 1), (LONG_GROUP, m.id_hash(LONG_GROUP), 0)]
        assert [(r.txn_prefix, r.txn_prefix_hash) for r in rollups.daily_rollups(session, "c", DAY, until)] == [
            ("app", m.id_hash("app")), (LONG_PREFIX, m.id_hash(LONG_PREFIX))]
        assert rollups.top_offenders(session, "c", DAY, until)[0].subject == LONG_SUBJECT
