"""The history-gap rule: offsets of __transaction_state are dense as written, so a skipped one was cleaned."""

from __future__ import annotations

import pytest

from txnwatch.core.model import TxnLogKind, TxnLogRecord, TxnState
from txnwatch.core.views import HistoryGap
from txnwatch.detect.txnlog_gaps import GapWatch, find_gaps, start_watch, watch_everything
from txnwatch.detect.txnlog_rules import IdState


def rec(partition: int, offset: int, at_ms: int | None = None) -> TxnLogRecord:
    at = 1_000 + offset if at_ms is None else at_ms
    return TxnLogRecord("app", partition, offset, at, TxnLogKind.VALUE, TxnState.EMPTY, None, 1, 0, 1_000, (), at)


@pytest.mark.parametrize(("expected", "offsets", "gaps"), [
    pytest.param({0: 5}, [5, 6, 7], [], id="dense-no-gap"),
    pytest.param({0: 5}, [9, 10], [(5, 8)], id="resume-past-cleaned-records"),
    pytest.param({0: 5}, [5, 7, 8, 12], [(6, 6), (9, 11)], id="holes-between-records-too"),
    pytest.param({}, [9, 12], [], id="partition-not-watched-first-start"),
    pytest.param({0: 5}, [3, 4, 5], [], id="records-before-the-position-are-not-gaps"),
])
def test_gaps(expected: dict[int, int], offsets: list[int], gaps: list[tuple[int, int]]) -> None:
    _, found = find_gaps(GapWatch(expected, dict.fromkeys(expected)), [rec(0, o) for o in offsets])
    assert [(g.first_offset, g.last_offset) for g in found] == gaps


def test_gap_spans_the_times_around_it_and_counts_records() -> None:
    watch = GapWatch({0: 5, 1: 0}, {0: 777, 1: None})
    watch, found = find_gaps(watch, [rec(0, 9, at_ms=900), rec(1, 2, at_ms=950), rec(0, 12, at_ms=990)])
    assert found == [HistoryGap(0, 5, 8, 777, 900), HistoryGap(1, 0, 1, None, 950), HistoryGap(0, 10, 11, 900, 990)]
    assert [g.records for g in found] == [4, 2, 2]
    assert watch.expected == {0: 13, 1: 3}


def _id(partition: int, offset: int, last_ms: int) -> IdState:
    return IdState(TxnState.EMPTY, 1, 0, 1_000, None, last_ms, (), 2, None, None, partition, offset)


def test_start_watch_takes_the_time_of_the_newest_stored_record_on_each_partition() -> None:
    ids = [_id(0, 3, 300), _id(0, 9, 900), _id(1, 4, 400), _id(2, 1, 100)]
    watch = start_watch({0: 10, 1: 7}, ids)
    assert watch.expected == {0: 10, 1: 7}
    assert watch.last_ms == {0: 900, 1: 400}  # partition 2 has no stored position: not watched


def test_watch_everything_adds_partitions_without_losing_what_is_known() -> None:
    watch = watch_everything(GapWatch({0: 10}, {0: 900}), {0: 10, 1: 4})
    assert watch.expected == {0: 10, 1: 4} and watch.last_ms == {0: 900, 1: None}
