"""First-unconsumed-record dating: Fetch parsing on real record batches, and the cache's validity rules."""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from tests.fixtures.lanes import examples
from txnwatch.core.model import PartitionSnapshot, TimeLagUnknown, TopicPartition
from txnwatch.kafka.records import Dated, RecordDates, Unreadable, fetch_calls, first_data_record, parse_fetch

TP = TopicPartition("orders", 0)


def _batch(base_offset: int, timestamps: list[int]) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, offset=base_offset)
    for ts in timestamps:
        builder.append(timestamp=ts, key=None, value=b"v")
    builder.close()
    return bytes(builder.buffer())


def _response(records: bytes | None, hwm: int, error_code: int = 0) -> Any:
    partition = SimpleNamespace(partition_index=0, error_code=error_code, high_watermark=hwm, records=records)
    return SimpleNamespace(responses=[SimpleNamespace(topic="orders", partitions=[partition])])


def test_the_record_at_the_offset_is_found_inside_a_batch_that_starts_earlier() -> None:
    # Brokers return whole batches: fetching offset 12 of a batch 10..13 starts at 10.
    found, problems = parse_fetch(_response(_batch(10, [1_000, 1_001, 1_002, 1_003]), hwm=14), {TP: 12})
    assert found == {(TP, 12): Dated(1_002, 14)} and problems == []


def test_nothing_below_the_high_watermark_and_errors() -> None:
    found, _ = parse_fetch(_response(None, hwm=12), {TP: 12})
    assert found == {(TP, 12): Dated(None, 12)}
    found, problems = parse_fetch(_response(None, hwm=20, error_code=29), {TP: 12})  # TOPIC_AUTHORIZATION_FAILED
    assert found == {} and [(p.api, p.code) for p in problems] == [("Fetch", 29)]


def test_cache_keeps_timestamps_and_rechecks_empty_answers_when_the_high_watermark_moves() -> None:
    dates = RecordDates(limit=1)
    partitions = {TP: PartitionSnapshot(TP, 1, high_watermark=20, last_stable_offset=20)}
    dates.remember({(TP, 5): Dated(7, 20), (TP, 19): Dated(None, 20)})
    assert dates.known([(TP, 5), (TP, 19)], partitions) == {(TP, 5): Dated(7, 20), (TP, 19): Dated(None, 20)}
    moved = {TP: PartitionSnapshot(TP, 1, high_watermark=25, last_stable_offset=25)}
    answered = dates.known([(TP, 5), (TP, 19)], moved)
    assert answered == {(TP, 5): Dated(7, 20)}
    assert dates.to_fetch([(TP, 19), (TP, 30)], answered) == [(TP, 19)]  # bounded by the limit


def test_two_offsets_of_one_partition_go_in_two_requests() -> None:
    calls = fetch_calls([(TP, 5), (TP, 9)], {TP: 1})
    offsets = [[p.fetch_offset for t in c.request.topics for p in t.partitions] for c in calls]
    assert offsets == [[5], [9]] and {c.node_id for c in calls} == {1}


# --- reading within a budget (issue 23: a compression bomb must not be decompressed whole) ---------------

MiB = 1024 * 1024


def _codec_batch(codec: int, base_offset: int, records: list[tuple[int, bytes]]) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 30, offset=base_offset)
    for ts, value in records:
        builder.append(timestamp=ts, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def _reference(raw: bytes, offset: int) -> int | None:
    """kafka-python's own reading: the timestamp of the first record at or after ``offset``."""
    records = MemoryRecords(raw)
    while (batch := records.next_batch()) is not None:
        for record in batch:
            if record.offset >= offset:
                return int(record.timestamp)
    return None


CODECS = [pytest.param(1, id="gzip"), pytest.param(2, id="snappy"), pytest.param(3, id="lz4"),
          pytest.param(4, id="zstd")]


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_is_dated_from_its_header_and_the_record_after_it_is_unreadable(codec: int) -> None:
    # Offsets 40, 41 (the bomb: 16 MiB of zeros), 42; a 1 MiB budget.
    raw = _codec_batch(codec, 40, [(1_000, b"a"), (2_000, bytes(16 * MiB)), (3_000, b"c")])
    assert len(raw) < 1 * MiB  # small on the wire
    assert first_data_record(raw, 40, 43, budget=MiB) == Dated(1_000, 43)
    assert first_data_record(raw, 41, 43, budget=MiB) == Dated(2_000, 43)  # its header lies in the first bytes
    budget_line = r"past the first 1 MiB that its \w+ batch \(offset \d+, [\d,]+ bytes\)"
    with pytest.raises(Unreadable, match=budget_line) as caught:
        first_data_record(raw, 42, 43, budget=MiB)
    assert caught.value.over_budget
    assert _reference(raw, 42) == 3_000  # what kafka-python finds by decompressing all 16 MiB


def test_an_unreadable_record_is_answered_reported_once_and_cached_whatever_the_high_watermark() -> None:
    raw = _codec_batch(1, 40, [(1_000, b"a"), (2_000, bytes(16 * MiB)), (3_000, b"c")])
    found, problems = parse_fetch(_response(raw, hwm=43), {TP: 42}, budget=MiB)
    (dated,) = found.values()
    assert dated.timestamp_ms is None and dated.unreadable is not None
    assert dated.unreadable.reason is TimeLagUnknown.RECORD_OVER_BUDGET
    assert str(dated.unreadable).startswith("record_over_budget: record 42: it lies past the first 1 MiB")
    assert [p.api for p in problems] == ["Fetch"] and "time lag is unknown" in problems[0].message
    dates = RecordDates(limit=10)
    dates.remember(found)
    later = {TP: PartitionSnapshot(TP, 1, high_watermark=90, last_stable_offset=90)}
    assert dates.known([(TP, 42)], later) == {(TP, 42): dated}  # not fetched again
    assert dates.to_fetch([(TP, 42)], dates.known([(TP, 42)], later)) == []


def test_a_damaged_batch_is_unreadable_not_a_crash() -> None:
    raw = bytearray(_codec_batch(1, 0, [(1_000, b"a" * 100), (2_000, b"b")]))
    raw[-3] ^= 0xFF
    found, problems = parse_fetch(_response(bytes(raw), hwm=2), {TP: 1})
    unreadable = found[(TP, 1)].unreadable
    assert unreadable is not None and unreadable.reason is TimeLagUnknown.RECORD_UNREADABLE
    assert "fails its CRC check" in str(unreadable) and len(problems) == 1


def test_log_append_time_batches_take_the_brokers_timestamp() -> None:
    raw = bytearray(_codec_batch(4, 0, [(1_000, b"a"), (2_000, b"b")]))
    struct.pack_into(">h", raw, 21, struct.unpack_from(">h", raw, 21)[0] | 0x08)  # attributes: LogAppendTime
    struct.pack_into(">q", raw, 35, 9_999)  # maxTimestamp, which the broker sets to its append time
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    assert first_data_record(bytes(raw), 1, 2) == Dated(9_999, 2) and _reference(bytes(raw), 1) == 9_999


def test_older_message_formats_go_through_kafka_python() -> None:
    builder = MemoryRecordsBuilder(magic=1, compression_type=1, batch_size=1 << 20, offset=7)
    for ts in (5_000, 6_000):
        builder.append(timestamp=ts, key=None, value=b"v")
    builder.close()
    assert first_data_record(bytes(builder.buffer()), 8, 9) == Dated(6_000, 9)


@settings(max_examples=examples(60), deadline=None)
@given(codec=st.sampled_from([0, 1, 2, 3, 4]),
       batches=st.lists(st.lists(st.tuples(st.integers(0, 2**40), st.binary(max_size=300)), min_size=1, max_size=8),
                        min_size=1, max_size=4),
       pick=st.integers(0, 40))
def test_the_bounded_reader_agrees_with_kafka_python(codec: int, batches: list[list[tuple[int, bytes]]],
                                                      pick: int) -> None:
    raw, base = b"", 100
    for records in batches:
        raw += _codec_batch(codec, base, records)
        base += len(records)
    offset = 100 + pick % (base - 100)
    dated = first_data_record(raw, offset, base)
    assert dated is not None and dated.timestamp_ms == _reference(raw, offset)
