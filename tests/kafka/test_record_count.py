"""Lag in records: read_committed Fetch answers walked as Kafka's consumer walks them, on real record batches.

The expected counts come from the generated history (which transaction each record belongs to and
how it ended), never from the walker under test.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecordsBuilder
from kafka.record.util import calc_crc32c

from tests.fixtures.lanes import examples
from txnwatch.core.model import GroupSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.kafka.record_count import Counted, RecordCounts, count_records, parse_fetch, wanted

TP = TopicPartition("orders", 0)
ABORT, COMMIT = 0, 1


def _at(base_offset: int, batch: bytes) -> bytes:
    """The batch as the broker stores it: kafka-python leaves the base offset to the broker (it is outside the CRC)."""
    return struct.pack(">q", base_offset) + batch[8:]


def _data(base_offset: int, count: int, producer_id: int = -1, codec: int = 0) -> bytes:
    txn = producer_id >= 0
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 20, offset=0,
                                   transactional=txn, producer_id=producer_id, producer_epoch=0 if txn else -1,
                                   base_sequence=0 if txn else -1)
    for _ in range(count):
        builder.append(timestamp=1_000, key=None, value=b"v")
    builder.close()
    return _at(base_offset, bytes(builder.buffer()))


def _marker(offset: int, producer_id: int, kind: int) -> bytes:
    """A control batch as a coordinator's WriteTxnMarkers leaves it: one record, key (version 0, type)."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, offset=0,
                                   transactional=True, producer_id=producer_id, producer_epoch=0, base_sequence=0)
    builder.append(timestamp=1_000, key=struct.pack(">hh", 0, kind), value=b"")
    builder.close()
    raw = bytearray(builder.buffer())
    attributes = struct.unpack_from(">h", raw, 21)[0] | 0x20
    struct.pack_into(">h", raw, 21, attributes)
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    return _at(offset, bytes(raw))


def test_one_record_and_one_commit_marker_behind_is_one_record() -> None:
    # The case: offset lag 2 (record 4, marker 5), one record to read.
    log = _data(0, 4, producer_id=7) + _marker(4, 7, COMMIT) + _data(5, 1, producer_id=7) + _marker(6, 7, COMMIT)
    assert count_records(log, committed=5, lso=7, aborted=[]) == Counted(1, 7)


def test_aborted_records_and_every_marker_are_left_out() -> None:
    # Producer 7 aborts 0..2 (marker 3), commits 4..5 (marker 6); producer 8's plain records 7..8.
    log = (_data(0, 3, producer_id=7) + _marker(3, 7, ABORT) + _data(4, 2, producer_id=7) + _marker(6, 7, COMMIT)
           + _data(7, 2))
    assert count_records(log, committed=0, lso=9, aborted=[(7, 0)]) == Counted(4, 9)
    # The same log read as read_uncommitted sees it (no aborted list) would count the aborted three.
    assert count_records(log, committed=0, lso=9, aborted=[]) == Counted(7, 9)


def test_interleaved_producers_abort_only_their_own_records() -> None:
    # 7 and 8 interleave; 7 aborts, 8 commits.
    log = (_data(0, 2, producer_id=7) + _data(2, 3, producer_id=8) + _data(5, 1, producer_id=7)
           + _marker(6, 7, ABORT) + _marker(7, 8, COMMIT))
    assert count_records(log, committed=0, lso=8, aborted=[(7, 0)]) == Counted(3, 8)


@pytest.mark.parametrize("codec", [pytest.param(0, id="uncompressed"), pytest.param(1, id="gzip")])
def test_a_committed_offset_inside_a_batch_counts_only_the_records_after_it(codec: int) -> None:
    log = _data(10, 5, producer_id=7, codec=codec) + _marker(15, 7, COMMIT)
    assert count_records(log, committed=13, lso=16, aborted=[]) == Counted(2, 16)


def test_batches_past_this_polls_lso_and_a_partial_last_batch_are_not_counted() -> None:
    whole = _data(0, 3) + _data(3, 3)
    assert count_records(whole, committed=0, lso=3, aborted=[]) == Counted(3, 3)  # the LSO moved since the poll
    assert count_records(whole[:-5], committed=0, lso=6, aborted=[]) == Counted(3, 3)  # cut by the fetch size
    assert count_records(b"", committed=0, lso=6, aborted=[]) is None


def test_a_damaged_control_record_is_an_error_as_data() -> None:
    marker = bytearray(_marker(3, 7, ABORT))
    del marker[-6:]
    struct.pack_into(">i", marker, 8, len(marker) - 12)
    response = SimpleNamespace(responses=[SimpleNamespace(topic="orders", partitions=[SimpleNamespace(
        partition_index=0, error_code=0, aborted_transactions=[SimpleNamespace(producer_id=7, first_offset=0)],
        records=_data(0, 3, producer_id=7) + bytes(marker))])])
    found, problems = parse_fetch(response, {TP: 4}, {TP: 0})
    assert found[TP].problem is not None and [p.api for p in problems] == ["Fetch"]


def test_counts_continue_across_polls_and_answer_only_at_the_lso() -> None:
    counts = RecordCounts(limit=10)
    answers, reads = counts.plan([(TP, 5)], {TP: 100})
    assert answers == {} and reads == {(TP, 5): 5}
    counts.add((TP, 5), Counted(30, 60))  # the first read stopped at 60 (byte bound)
    answers, reads = counts.plan([(TP, 5)], {TP: 100})
    assert answers == {} and reads == {(TP, 5): 60}
    counts.add((TP, 5), Counted(12, 100))
    assert counts.plan([(TP, 5)], {TP: 100}) == ({(TP, 5): 42}, {})
    assert counts.plan([(TP, 5)], {TP: 90}) == ({}, {(TP, 5): 5})  # the LSO went back: counted afresh


def test_wanted_is_group_partitions_behind_the_lso_most_first() -> None:
    other = TopicPartition("orders", 1)
    partitions = {TP: PartitionSnapshot(TP, 1, high_watermark=20, last_stable_offset=10, log_start_offset=3),
                  other: PartitionSnapshot(other, 1, high_watermark=9, last_stable_offset=9)}
    groups = [GroupSnapshot("g", "Stable", "consumer", {TP: 2, other: 1}),
              GroupSnapshot("h", "Stable", "consumer", {TP: 10, other: 8})]
    assert wanted(partitions, groups) == [(other, 1), (other, 8)]  # g on TP is below the log start


# --- against a model of the log -----------------------------------------------------------------------------


@dataclass
class _Log:
    raw: bytes
    aborted: list[tuple[int, int]]
    delivered: list[int]  # offsets of the records a read_committed consumer gets
    lso: int


@st.composite
def _logs(draw: Any) -> _Log:
    """Transactions of up to three producers, interleaved, each committed or aborted (one maybe left open),
    plus plain records; batches of 1 to 100 records."""
    raw, aborted, delivered, offset = b"", [], [], 0
    open_txns: dict[int, list[int]] = {}  # producer -> its records' offsets
    first_offset: dict[int, int] = {}
    for _ in range(draw(st.integers(1, 12))):
        producer = draw(st.integers(-1, 2))
        action = draw(st.sampled_from(["write", "write", "commit", "abort"]))
        if producer < 0 or action == "write":
            count = draw(st.sampled_from([1, 2, 100]))
            raw += _data(offset, count, producer_id=producer)
            offsets = list(range(offset, offset + count))
            if producer < 0:
                delivered += offsets
            else:
                first_offset.setdefault(producer, offset)
                open_txns.setdefault(producer, []).extend(offsets)
            offset += count
        elif producer in open_txns:
            raw += _marker(offset, producer, COMMIT if action == "commit" else ABORT)
            offset += 1
            records = open_txns.pop(producer)
            if action == "commit":
                delivered += records
            else:
                aborted.append((producer, first_offset[producer]))
            del first_offset[producer]
    lso = min(first_offset.values(), default=offset)
    return _Log(raw, aborted, sorted(o for o in delivered if o < lso), lso)


@settings(max_examples=examples(150), deadline=None)
@given(log=_logs(), data=st.data())
def test_the_count_is_what_a_read_committed_consumer_delivers(log: _Log, data: Any) -> None:
    committed = data.draw(st.integers(0, log.lso))
    expected = sum(1 for o in log.delivered if o >= committed)
    counted = count_records(log.raw, committed, log.lso, log.aborted)
    if counted is None:  # nothing below the LSO in the log
        assert log.lso == 0 or not log.raw
    else:
        assert counted == Counted(expected, log.lso)
