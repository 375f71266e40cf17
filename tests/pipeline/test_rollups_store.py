"""Rollup loading and report queries on SQLite and real PostgreSQL (no Spark needed)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from txnwatch.store.db import make_sessionmaker
from txnwatch.store.rollups import daily_rollups, lag_rollups, replace_window, top_offenders, topic_rollups

DAY = datetime(2026, 11, 20, tzinfo=timezone.utc)


def _txn(day: datetime, prefix: str, count: int, period: str = "day") -> dict[str, object]:
    return {"cluster": "c1", "period": period, "period_start": day.replace(tzinfo=None), "txn_prefix": prefix,
            "topic": "*", "txn_count": count, "commits": count, "aborts": 0, "timeout_aborts": 0, "fences": 0,
            "duration_ms_p50": 1.0, "duration_ms_p95": 2.0, "duration_ms_p99": 3.0, "commit_rate": 1.0,
            "abort_rate": 0.0, "timeout_abort_rate": 0.0, "fence_rate": 0.0}


def test_replace_window_and_queries(engine: Engine) -> None:
    sessions = make_sessionmaker(engine)
    rows: dict[str, Any] = {
        "transactions": [_txn(DAY, "appA", 5), _txn(DAY, "appB", 2), _txn(DAY + timedelta(hours=3), "appA", 1, "hour"),
                         _txn(DAY + timedelta(days=1), "appA", 9)],
        "topics": [{"cluster": "c1", "period": "day", "period_start": DAY, "topic": "orders", "offset_samples": 2,
                    "max_hwm_lso_gap": 600, "lso_stalls": 1, "lso_stall_minutes": 30.0, "hanging_txns": 1,
                    "verification_samples": 4, "verification_failures": 1, "verification_failure_rate": 0.25}],
        "lag": [{"cluster": "c1", "period": "day", "period_start": DAY, "group_id": "g1", "topic": "orders",
                 "samples": 5, "lag_lso_p99": 100.0, "lag_lso_max": 100}],
        "offenders": [{"cluster": "c1", "period": "day", "period_start": DAY, "kind": "txn_aborts", "rank": r,
                       "subject": f"appA-{r}", "value": 10.0 - r} for r in (1, 2, 3)],
    }
    with sessions.begin() as s:
        assert replace_window(s, DAY, DAY + timedelta(days=2), rows)["transactions"] == 4
    with sessions() as s:
        daily = daily_rollups(s, "c1", DAY, DAY + timedelta(days=2))
        assert [(r.period_start, r.txn_prefix, r.txn_count) for r in daily] == [
            (DAY, "appA", 5), (DAY, "appB", 2), (DAY + timedelta(days=1), "appA", 9)]
        assert topic_rollups(s, "c1", DAY, DAY + timedelta(days=1))[0].lso_stall_minutes == 30.0
        assert lag_rollups(s, "c1", DAY, DAY + timedelta(days=1), group_id="g1")[0].lag_lso_max == 100
        assert [o.subject for o in top_offenders(s, "c1", DAY, DAY + timedelta(days=1), "txn_aborts", limit=2)] == [
            "appA-1", "appA-2"]
        assert daily_rollups(s, "other", DAY, DAY + timedelta(days=2)) == []

    # A rerun of the first day only replaces that day: appB went quiet, the next day is untouched.
    with sessions.begin() as s:
        replace_window(s, DAY, DAY + timedelta(days=1), {"transactions": [_txn(DAY, "appA", 6)]})
    with sessions() as s:
        assert [(r.txn_prefix, r.txn_count) for r in daily_rollups(s, "c1", DAY, DAY + timedelta(days=2))] == [
            ("appA", 6), ("appA", 9)]
        assert top_offenders(s, "c1", DAY, DAY + timedelta(days=1)) == []


def _kafka_max_id(head: str) -> str:
    """An id of Kafka's maximum, 32,767 UTF-8 bytes (multi-byte characters included: Kafka counts bytes)."""
    body = head + "é" * ((32_767 - len(head.encode())) // 2)
    return body + "x" * (32_767 - len(body.encode()))


def test_replace_window_keeps_ids_of_kafkas_maximum_length(engine: Engine) -> None:
    """Issue 23 item 1 for the rollups: a 32,767-byte group id, transactional-id prefix or offender subject is
    written whole beside every other tenant's rows (bounded columns failed the whole write on PostgreSQL), and two
    ids that share their first thousands of characters stay two rows."""
    sessions = make_sessionmaker(engine)
    group_a, group_b = "é" * 16_383 + "a", "é" * 16_383 + "b"  # 32,767 bytes each, one last character apart
    prefix = _kafka_max_id("prefix")
    lag = [{"cluster": "c1", "period": "day", "period_start": DAY, "group_id": g, "topic": "orders", "samples": 1,
            "lag_lso_max": n} for g, n in ((group_a, 1), (group_b, 2), ("small", 3))]
    rows: dict[str, Any] = {
        "transactions": [_txn(DAY, prefix, 4), _txn(DAY, "appA", 5)],
        "lag": lag,
        "offenders": [{"cluster": "c1", "period": "day", "period_start": DAY, "kind": "lag_lso_max", "rank": 1,
                       "subject": group_b, "value": 2.0}],
    }
    with sessions.begin() as s:
        loaded = replace_window(s, DAY, DAY + timedelta(days=1), rows)
    assert (loaded["transactions"], loaded["lag"], loaded["offenders"]) == (2, 3, 1)
    with sessions() as s:
        until = DAY + timedelta(days=1)
        assert {(r.txn_prefix, r.txn_count) for r in daily_rollups(s, "c1", DAY, until)} == {(prefix, 4), ("appA", 5)}
        assert lag_rollups(s, "c1", DAY, until, group_id=group_b)[0].lag_lso_max == 2
        assert sorted(len(r.group_id.encode()) for r in lag_rollups(s, "c1", DAY, until)) == [5, 32_767, 32_767]
        assert top_offenders(s, "c1", DAY, until)[0].subject == group_b
    # The unique key still refuses the same group twice in one period.
    with pytest.raises(IntegrityError), sessions.begin() as s:
        replace_window(s, DAY, DAY + timedelta(days=1), {"lag": [lag[0], dict(lag[0])]})
