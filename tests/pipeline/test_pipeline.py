"""Real PySpark (local[2]) over a hand-written history with answers worked out in plain Python."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds
import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from tests.pipeline.history import DAY, NEXT_DAY, TRANSITIONS, nearest_rank, seed, transition
from txnwatch.pipeline.prefix import prefix_of
from txnwatch.pipeline.run import Window, run_pipeline
from txnwatch.pipeline.synth import synthesize
from txnwatch.store.archive import export_history
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import upgrade
from txnwatch.store.rollups import daily_rollups, lag_rollups, top_offenders, topic_rollups, transaction_rollups

pytestmark = [pytest.mark.spark, pytest.mark.slow]

WINDOW = Window(DAY.date() - timedelta(days=1), NEXT_DAY.date())


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Engine:
    url = f"sqlite:///{tmp_path / 'txnwatch.db'}"
    upgrade(url)
    return make_engine(url)


def _key(rows: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [r for r in rows if all(r[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, found)
    return found[0]


def _assert_rank_close(value: float | None, values: list[float], q: float) -> None:
    """percentile_approx returns an element within one rank of the exact nearest-rank answer here."""
    ordered = sorted(values)
    exact = ordered.index(nearest_rank(values, q))
    assert value in ordered and abs(ordered.index(value) - exact) <= 1, (value, q, ordered)


def _expected(prefix: str, day: date, topic: str | None = None) -> dict[str, Any]:
    rows = [t for t in TRANSITIONS if prefix_of("last-dash", t[0]) == prefix and t[1].date() == day
            and (topic is None or any(p.rsplit("-", 1)[0] == topic for p in t[4]))]
    done = [t for t in rows if {"commit", "abort"} & set(t[2])]
    return {"txn_count": len(done), "commits": sum("commit" in t[2] for t in rows),
            "aborts": sum("abort" in t[2] for t in rows), "timeout_aborts": sum("timeout_abort" in t[2] for t in rows),
            "fences": sum("fenced" in t[2] for t in rows), "durations": [t[3] for t in done]}


def test_known_answers_loaded_into_the_database(spark: Any, sqlite_engine: Engine, tmp_path: Path) -> None:
    seed(sqlite_engine)
    archive = str(tmp_path / "archive")
    export_history(sqlite_engine, archive)
    out = run_pipeline(spark, archive, WINDOW, sqlite_engine)

    txns = out["transactions"]
    for prefix, day, topic in (("appA", DAY, "*"), ("appA", DAY, "orders"), ("appA", DAY, "payments"),
                               ("appB", NEXT_DAY, "*")):
        exp = _expected(prefix, day.date(), None if topic == "*" else topic)
        got = _key(txns, cluster="c1", period="day", period_start=day, txn_prefix=prefix,
                   topic=topic)
        assert {k: got[k] for k in ("txn_count", "commits", "aborts", "timeout_aborts", "fences")} == {
            k: exp[k] for k in ("txn_count", "commits", "aborts", "timeout_aborts", "fences")}
        assert got["commit_rate"] == pytest.approx(exp["commits"] / exp["txn_count"])
        assert got["fence_rate"] == pytest.approx(exp["fences"] / exp["txn_count"])
        for q, column in ((0.5, "duration_ms_p50"), (0.95, "duration_ms_p95"), (0.99, "duration_ms_p99")):
            _assert_rank_close(got[column], exp["durations"], q)
    hour10 = _key(txns, period="hour", period_start=DAY + timedelta(hours=10),
                  txn_prefix="appA", topic="*")
    assert (hour10["txn_count"], hour10["commits"], hour10["aborts"]) == (12, 10, 2)
    assert not [r for r in txns if r["txn_prefix"] == "appB" and r["period_start"].date() == DAY.date()]

    with make_sessionmaker(sqlite_engine)() as s:
        until = NEXT_DAY + timedelta(days=1)
        daily = {(r.period_start, r.txn_prefix): r for r in daily_rollups(s, "c1", DAY, until)}
        assert daily[(DAY, "appA")].txn_count == 17 and daily[(NEXT_DAY, "appB")].txn_count == 3
        assert daily[(DAY, "appA")].abort_rate == pytest.approx(2 / 17)
        assert daily[(DAY, "appA")].timeout_abort_rate == pytest.approx(1 / 17)
        hourly = transaction_rollups(s, "c1", DAY, until, period="hour", txn_prefix="appA")
        assert sum(r.txn_count for r in hourly) == 17

        (orders,) = topic_rollups(s, "c1", DAY, DAY + timedelta(days=1), topic="orders")
        assert (orders.offset_samples, orders.max_hwm_lso_gap, orders.lso_stalls) == (2, 600, 1)
        assert orders.lso_stall_minutes == pytest.approx(30.0)  # the open stall is not archived yet
        assert (orders.hanging_txns, orders.verification_samples, orders.verification_failures) == (1, 4, 1)
        assert orders.verification_failure_rate == pytest.approx(0.25)
        _assert_rank_close(orders.verification_ms_p50, [10, 20, 30, 40], 0.5)

        (lag,) = lag_rollups(s, "c1", DAY, DAY + timedelta(days=1), group_id="g1")
        assert (lag.samples, lag.lag_lso_max) == (5, 100)
        _assert_rank_close(lag.lag_lso_p50, [1, 2, 3, 4, 100], 0.5)

        offenders = {(o.kind, o.rank): (o.subject, o.value)
                     for o in top_offenders(s, "c1", DAY, DAY + timedelta(days=1))}
        assert offenders[("txn_aborts", 1)] == ("appA-0", 2.0)
        assert offenders[("txn_max_duration_ms", 1)] == ("appA-0", 6000.0)
        assert offenders[("lso_stall_minutes", 1)] == ("orders-0", pytest.approx(30.0))
        assert offenders[("lag_lso_max", 1)] == ("g1", 100.0)
        assert ("txn_fences", 2) not in offenders

    assert (tmp_path / "archive" / "_rollups" / "transactions" / "cluster=c1").is_dir()


def test_duplicate_exports_and_late_data(spark: Any, sqlite_engine: Engine, tmp_path: Path) -> None:
    seed(sqlite_engine)
    archive = str(tmp_path / "archive")
    export_history(sqlite_engine, archive)
    export_history(sqlite_engine, archive)  # nothing new: the rollups must not double
    with Session(sqlite_engine) as s, s.begin():  # a late row for DAY, archived after the first run
        s.add(transition(1, "appA-7", DAY + timedelta(hours=3), ["abort"], 9000, ["orders-5"]))
    export_history(sqlite_engine, archive)
    export_history(sqlite_engine, archive)
    out = run_pipeline(spark, archive, WINDOW, sqlite_engine)
    got = _key(out["transactions"], period="day", period_start=DAY, txn_prefix="appA", topic="*")
    assert (got["txn_count"], got["aborts"]) == (18, 3)
    with make_sessionmaker(sqlite_engine)() as s:
        assert daily_rollups(s, "c1", DAY, DAY + timedelta(days=1))[0].txn_count == 18


def test_empty_archive(spark: Any, sqlite_engine: Engine, tmp_path: Path) -> None:
    out = run_pipeline(spark, str(tmp_path / "nothing"), WINDOW, sqlite_engine)
    assert out == {"transactions": [], "topics": [], "lag": [], "offenders": []}


def test_synthetic_history_totals(spark: Any, tmp_path: Path) -> None:
    archive = str(tmp_path / "synth")
    synthesize(archive, 20_000, days=2, clusters=2, until=NEXT_DAY.date())
    out = run_pipeline(spark, archive, Window(DAY.date(), NEXT_DAY.date()))
    table = ds.dataset(str(tmp_path / "synth" / "transitions"), partitioning="hive").to_table()
    events = table.column("events").to_pylist()
    day_rows = [r for r in out["transactions"] if r["period"] == "day" and r["topic"] == "*"]
    assert sum(r["commits"] for r in day_rows) == sum("commit" in e for e in events)
    assert sum(r["txn_count"] for r in day_rows) == sum(bool({"commit", "abort"} & set(e)) for e in events)
    assert len({r["cluster"] for r in day_rows}) == 2
    lag_rows = ds.dataset(str(tmp_path / "synth" / "lag"), partitioning="hive").count_rows()
    assert sum(r["samples"] for r in out["lag"] if r["period"] == "hour") == lag_rows
