"""read_committed consumer lag, the control-marker rule and time lag."""

from __future__ import annotations

from txnwatch.detect import lag
from txnwatch.model import GroupSnapshot, TopicPartition

from tests.unit.detect.builders import TP, TP1, partition, producer, snapshot


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
