"""The tail's positions, counters and aggregates on SQLite as plain tuples (store/txnlog_progress.py _upsert_sqlite):
the same rows, stored as the same types, as Core's upserts write (issue 25: a trickle's commits)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text

from txnwatch.core import vocabulary as v
from txnwatch.detect import txnlog as d
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store import txnlog_models as t
from txnwatch.store import txnlog_progress
from txnwatch.store.clusters import register_clusters
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import upgrade

MINUTE = 60_000
START = datetime(2026, 11, 26, 18, 0, 0, 123_456, tzinfo=UTC)


def _commits() -> list[tuple[datetime, dict[int, int], d.TxnLogFindings]]:
    """Commits that insert, then add to, every row: counters growing, zero counts (left out), a minute's maximum
    that grows then does not, a new minute, positions moving, a time given in another zone."""
    plus_two = START.astimezone(timezone(timedelta(hours=2)))
    return [
        (START, {0: 5, 7: 12}, d.TxnLogFindings(
            counts={v.COMMIT: 2, v.ABORT: 0, "records": 6},
            buckets={MINUTE * 29_000_000: {v.COMMIT: 2, "duration_ms_sum": 40, "duration_count": 2,
                                           "duration_ms_max": 30}})),
        (START + timedelta(microseconds=1), {7: 15}, d.TxnLogFindings(
            counts={v.COMMIT: 1, v.ABORT: 1, v.FENCED: 3, "records": 4},
            buckets={MINUTE * 29_000_000: {v.ABORT: 1, "duration_ms_sum": 90, "duration_count": 1,
                                           "duration_ms_max": 90},
                     MINUTE * 29_000_001: {v.TIMEOUT_ABORT: 1, v.EXPIRED: 2, v.EPOCH_BUMP: 1, v.FENCED: 1,
                                           v.PRODUCER_ID_CHANGE: 1, v.ILLEGAL_TRANSITION: 1, "unknown_key": 5}})),
        (plus_two + timedelta(seconds=1), {0: 6, 3: 1}, d.TxnLogFindings(
            counts={"records": 1},
            buckets={MINUTE * 29_000_000: {v.COMMIT: 1, "duration_ms_sum": 7, "duration_count": 1,
                                           "duration_ms_max": 7}})),
        (START + timedelta(seconds=2), {}, d.TxnLogFindings()),
    ]


def _stored(engine: Engine, cluster_id: int) -> dict[str, list[tuple[Any, ...]]]:
    out = {}
    for table in (t.TxnLogPosition, t.TxnLogCounter, t.TxnLogAggregate):
        columns = [c.name for c in table.__table__.columns if c.name not in ("id", "cluster_id")]
        kinds = ", ".join(f"typeof({c})" for c in columns)
        with engine.connect() as connection:
            out[table.__tablename__] = [tuple(r) for r in connection.execute(text(
                f"SELECT {', '.join(columns)}, {kinds} FROM {table.__tablename__} WHERE cluster_id = :c "
                f"ORDER BY {columns[0]}"), {"c": cluster_id})]
    return out


def test_plain_upserts_store_what_core_upserts_store(tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'upserts.db'}"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        ids = register_clusters(session, {"core": "h:9092", "plain": "h:9093"}, START)
    core, plain = ids["core"], ids["plain"]
    for now, positions, findings in _commits():
        with sessions.begin() as session:
            txnlog_progress._upsert_core(session, "sqlite", core, positions, findings, now)
        with sessions.begin() as session:
            txnlog_progress._upsert_sqlite(session, plain, positions, findings, now)
    expected, got = _stored(engine, core), _stored(engine, plain)
    assert got == expected
    # and the figures themselves, not only their agreement: the counters add up, the minute keeps its maximum
    assert [r[:2] for r in got["txnlog_counters"]] == [("abort", 1), ("commit", 3), ("fenced", 3), ("records", 11)]
    assert [r[:3] for r in got["txnlog_positions"]] == [(0, 6, "2026-11-26 18:00:01.123456"),
                                                        (3, 1, "2026-11-26 18:00:01.123456"),
                                                        (7, 15, "2026-11-26 18:00:00.123457")]
    first_minute = got["txnlog_aggregates"][0]
    assert first_minute[:12] == ("2025-02-19 21:20:00.000000", 3, 1, 0, 0, 0, 0, 0, 0, 137, 4, 90)
    assert got["txnlog_aggregates"][1][:12] == ("2025-02-19 21:21:00.000000", 0, 0, 1, 1, 1, 1, 2, 1, 0, 0, 0)
    engine.dispose()


def test_write_batch_on_sqlite_leaves_core_upserts_unbuilt(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The trickle's commits on SQLite go through the plain path (not Core's session.execute per table)."""
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    upgrade(url)
    engine = create_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        cid = register_clusters(session, {"c": "h:9092"}, START)["c"]
    monkeypatch.setattr(txnlog_progress, "_upsert_core", lambda *a, **k: pytest.fail("Core path on SQLite"))
    for _, positions, findings in _commits():
        with sessions.begin() as session:
            store_txnlog.write_batch(session, cid, positions, findings)
    assert [r[:2] for r in _stored(engine, cid)["txnlog_counters"]][-1] == ("records", 11)
    engine.dispose()
