"""kafka_exporter's lag formula, reproduced: raw HWM - committed, -1 handling, topic skipping and sums."""

from __future__ import annotations

import pytest

from tests.unit.detect.builders import TP, TP1, partition, producer, snapshot
from txnwatch.core.model import GroupSnapshot, TopicPartition
from txnwatch.detect import exporter, lag

OTHER = TopicPartition("payments", 0)
MARKER_END = (producer(start=None, coordinator_epoch=2),)  # ends on a commit marker


@pytest.mark.parametrize(("offsets", "expected"), [
    pytest.param({TP: 100}, [(TP, 100, 1), (TP1, -1, -1)],
                 id="a-commit-marker-residual-of-1-stays-1-and-an-uncommitted-partition-of-a-consumed-topic-is--1"),
    pytest.param({TP: 101, TP1: 50}, [(TP, 101, 0), (TP1, 50, 70)], id="raw-difference-per-partition"),
    pytest.param({TP: 120}, [(TP, 120, -19), (TP1, -1, -1)], id="committed-past-the-hwm-is-negative-not-clamped"),
    pytest.param({TP: -1, TP1: -1}, [], id="a-topic-with-nothing-committed-is-skipped"),
    pytest.param({OTHER: 5}, [], id="unwatched-topics-are-not-reported"),
])
def test_series_match_kafka_exporter(offsets: dict[TopicPartition, int],
                                     expected: list[tuple[TopicPartition, int, int]]) -> None:
    snap = snapshot(partitions=(partition(hwm=101, lso=101, producers=MARKER_END), partition(tp=TP1, hwm=120, lso=100)),
                    groups=(GroupSnapshot("g", "Stable", "consumer", offsets),))
    rows = exporter.exporter_lags(snap)
    assert [(r.tp, r.committed, r.lag) for r in rows] == expected


def test_marker_corrected_lag_differs_where_kafka_exporter_does_not_correct() -> None:
    snap = snapshot(partitions=(partition(hwm=101, lso=101, producers=MARKER_END),),
                    groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 100}),))
    (raw,) = exporter.exporter_lags(snap)
    (ours,) = lag.group_lags(snap, {}, 0)
    assert (raw.lag, ours.lag_hwm, ours.lag_lso) == (1, 0, 0)


def test_unknown_high_watermark_gives_no_lag_but_keeps_the_offset() -> None:
    snap = snapshot(partitions=(partition(hwm=None, lso=None),), groups=(GroupSnapshot("g", None, None, {TP: 3}),))
    (row,) = exporter.exporter_lags(snap)
    assert (row.committed, row.lag) == (3, None)


def test_sums_count_minus_one_offsets_but_not_minus_one_lags() -> None:
    snap = snapshot(partitions=(partition(hwm=10, lso=10), partition(tp=TP1, hwm=30, lso=30)),
                    groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 4}),))
    (total,) = exporter.exporter_sums(exporter.exporter_lags(snap))
    assert (total.topic, total.committed_sum, total.lag_sum) == ("orders", 4 - 1, 6)
