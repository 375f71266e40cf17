"""First-unconsumed-record dating: Fetch parsing on real record batches, and the cache's validity rules."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from kafka.record.memory_records import MemoryRecordsBuilder

from txnwatch.core.model import PartitionSnapshot, TopicPartition
from txnwatch.kafka.records import Dated, RecordDates, fetch_calls, parse_fetch

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
    assert dates.known([(TP, 5), (TP, 19)], partitions) == {(TP, 5): 7, (TP, 19): None}
    moved = {TP: PartitionSnapshot(TP, 1, high_watermark=25, last_stable_offset=25)}
    answered = dates.known([(TP, 5), (TP, 19)], moved)
    assert answered == {(TP, 5): 7}
    assert dates.to_fetch([(TP, 19), (TP, 30)], answered) == [(TP, 19)]  # bounded by the limit


def test_two_offsets_of_one_partition_go_in_two_requests() -> None:
    calls = fetch_calls([(TP, 5), (TP, 9)], {TP: 1})
    offsets = [[p.fetch_offset for t in c.request.topics for p in t.partitions] for c in calls]
    assert offsets == [[5], [9]] and {c.node_id for c in calls} == {1}
