"""read_committed consumer lag, the control-marker rule and time lag."""

from __future__ import annotations

from dataclasses import replace

from tests.unit.detect.builders import TP, TP1, partition, producer, snapshot
from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, TimeLagUnknown, TopicPartition, UnreadableRecord
from txnwatch.detect import lag
from txnwatch.kafka import records


def test_trailing_commit_marker_is_not_lag() -> None:
    committed_by_txn = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=2),))
    plain = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=-1),))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 100})
    (marker,) = lag.group_lags(snapshot(partitions=(committed_by_txn,), groups=(group,)), {}, 0)
    (real,) = lag.group_lags(snapshot(partitions=(plain,), groups=(group,)), {}, 0)
    assert (marker.lag_hwm, marker.lag_lso, marker.lag_seconds) == (0, 0, 0.0)
    assert (real.lag_hwm, real.lag_lso) == (1, 1)


def test_lag_ignores_groups_without_a_committed_offset_and_unwatched_partitions() -> None:
    part = partition(hwm=120, lso=100)
    group = GroupSnapshot("g", "Stable", "consumer", {TP: -1, TP1: 5})
    assert lag.group_lags(snapshot(partitions=(part,), groups=(group,)), {}, 0) == []


def test_residual_of_one_is_lag_while_a_transaction_is_open() -> None:
    part = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=2, last_ms=5),
                                                   producer(pid=8, start=90, coordinator_epoch=1, last_ms=1)))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 100})
    (row,) = lag.group_lags(snapshot(partitions=(part,), groups=(group,)), {}, 0)
    assert row.lag_lso == 1


def test_lag_against_lso_and_hwm_while_a_transaction_is_open() -> None:
    part = partition(hwm=120, lso=100, producers=(producer(start=100),))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 90})
    (row,) = lag.group_lags(snapshot(partitions=(part,), groups=(group,)), {}, 0)
    assert (row.lag_hwm, row.lag_lso) == (30, 10)


def test_time_lag_from_lso_history() -> None:
    history = ((0, 10), (5_000, 20), (10_000, 30))
    assert lag.time_lag_seconds(history, 15, 12_000) == 7.0
    assert lag.time_lag_seconds(history, 30, 12_000) == 0.0
    assert lag.time_lag_seconds(history, 5, 12_000) == 15.0  # before the history: extrapolated
    tp = TopicPartition("t", 0)
    h = lag.update_history({}, snapshot(partitions=(partition(tp=tp, lso=1),)), 0, keep=2)
    h = lag.update_history(h, snapshot(partitions=(partition(tp=tp, lso=1),)), 1, keep=2)
    h = lag.update_history(h, snapshot(partitions=(partition(tp=tp, lso=2),)), 2, keep=2)
    h = lag.update_history(h, snapshot(partitions=(partition(tp=tp, lso=3),)), 3, keep=2)
    assert h[tp] == ((2, 2), (3, 3))


def test_time_lag_extrapolates_beyond_the_kept_history() -> None:
    history = ((10_000, 100), (20_000, 200))  # 100 offsets in the 20 s up to now: 5 offsets/s
    assert lag.time_lag_seconds(history, 50, 30_000) == 30.0  # 20 s of history + 50 offsets at 5/s
    assert lag.time_lag_seconds(((10_000, 100),), 50, 30_000) is None


def test_time_lag_is_the_age_of_the_first_unconsumed_record_even_while_the_lso_is_stalled() -> None:
    # The LSO has not moved for an hour (history says so); the record at the committed offset is 600 s old.
    part = partition(hwm=500, lso=100, producers=(producer(start=100),))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 100})
    snap = snapshot(partitions=(part,), groups=(group,))
    now = 3_600_000
    history = {TP: ((0, 100),)}
    (fallback,) = lag.group_lags(snap, history, now)
    assert fallback.lag_seconds == 0.0  # caught up with the LSO: all the history could say
    dated = replace(snap, first_unconsumed_ms={(TP, 100): now - 600_000})
    (row,) = lag.group_lags(dated, history, now)
    assert row.lag_seconds == 600.0


def test_an_unreadable_first_record_makes_the_time_lag_unknown_with_its_reason_not_an_estimate() -> None:
    part = partition(hwm=500, lso=400)
    snap = snapshot(partitions=(part,), groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 100}),))
    history = {TP: ((0, 90), (60_000, 400))}  # enough for the LSO-history estimate: the LSO passed 100 at 60 s
    (estimated,) = lag.group_lags(snap, history, 120_000)
    assert (estimated.lag_seconds, estimated.lag_seconds_unknown) == (60.0, None)
    bomb = UnreadableRecord(TimeLagUnknown.RECORD_OVER_BUDGET, "record 100: it lies past the first 8 MiB")
    unreadable = replace(snap, unreadable_records={(TP, 100): bomb})
    (row,) = lag.group_lags(unreadable, history, 120_000)
    assert (row.lag_seconds, row.lag_seconds_unknown, row.lag_lso) == (None, bomb, 300)
    assert str(row.lag_seconds_unknown) == "record_over_budget: record 100: it lies past the first 8 MiB"


def test_only_markers_left_means_no_time_lag() -> None:
    part = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=2),))
    snap = snapshot(partitions=(part,), groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 100}),))
    (row,) = lag.group_lags(snap, {}, 5_000)
    assert row.lag_seconds == 0.0
    fetched = replace(snap, first_unconsumed_ms={(TP, 100): None})  # the fetch found only the marker
    (row,) = lag.group_lags(fetched, {}, 5_000)
    assert row.lag_seconds == 0.0


def test_lagging_partitions_come_most_lagging_first_once_per_offset() -> None:
    parts = {p.tp: p for p in (partition(hwm=50, lso=50), partition(tp=TP1, hwm=500, lso=500))}
    groups = (GroupSnapshot("a", None, None, {TP: 40, TP1: 10}), GroupSnapshot("b", None, None, {TP: 40, TP1: 500}))
    assert records.lagging(parts, groups) == [(TP1, 10), (TP, 40)]
    retained = {TP: replace(parts[TP], log_start_offset=45)}
    assert records.lagging(retained, groups) == []  # below the log start: nothing to fetch


def test_last_commit_is_the_poll_that_first_saw_the_offset_and_unknown_before_a_change() -> None:
    def snap(offset: int) -> ClusterSnapshot:
        return snapshot(partitions=(partition(hwm=100, lso=100),),
                        groups=(GroupSnapshot("g", "Stable", "consumer", {TP: offset}),))
    seen = lag.track_commits({}, snap(10), 1_000)
    assert seen == {("g", TP): (10, None)}
    seen = lag.track_commits(seen, snap(10), 2_000)
    assert seen == {("g", TP): (10, None)}
    seen = lag.track_commits(seen, snap(20), 3_000)
    seen = lag.track_commits(seen, snap(20), 4_000)
    assert seen == {("g", TP): (20, 3_000)}
    (row,) = lag.group_lags(snap(20), {}, 4_000, seen)
    assert row.last_commit_ms == 3_000
    assert lag.track_commits(seen, snapshot(), 5_000) == {}  # the group vanished
