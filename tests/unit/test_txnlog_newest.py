"""The tail's newest record time (collect/txnlog_tail.newest_ms): the max of the records' ``at_ms`` whatever they hold,
read in C only when every record is a value with its coordinator time."""

from __future__ import annotations

import pytest

from txnwatch.collect.txnlog_tail import newest_ms
from txnwatch.core.model import TxnLogKind, TxnLogRecord, TxnState


def _value(last_update_ms: int, timestamp_ms: int | None = 5_000) -> TxnLogRecord:
    return TxnLogRecord("app", 0, 1, timestamp_ms, TxnLogKind.VALUE, TxnState.ONGOING, None, 7, 0, 60_000, (),
                        last_update_ms, None)


def _other(kind: TxnLogKind, timestamp_ms: int | None) -> TxnLogRecord:
    return TxnLogRecord("app", 0, 2, timestamp_ms, kind)


@pytest.mark.parametrize(("records", "expected"), [
    pytest.param([_value(3_000), _value(9_000), _value(4_000)], 9_000, id="values: the newest coordinator time"),
    pytest.param([_value(3_000), _other(TxnLogKind.TOMBSTONE, 12_000)], 12_000,
                 id="a tombstone counts at its append time"),
    pytest.param([_value(3_000), _other(TxnLogKind.UNDECODABLE, 8_000)], 8_000,
                 id="an undecodable record counts at its append time"),
    pytest.param([_value(0, timestamp_ms=7_000), _value(2_000)], 7_000,
                 id="a value without a coordinator time counts at its append time"),
    pytest.param([_other(TxnLogKind.TOMBSTONE, None)], 0, id="no time at all is 0"),
])
def test_newest_ms_is_the_newest_at_ms(records: list[TxnLogRecord], expected: int) -> None:
    assert newest_ms(records) == expected == max(r.at_ms for r in records)
