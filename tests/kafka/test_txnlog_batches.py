"""The tail's own walk of fetched record batches gives exactly what kafka-python's records decoded give.

The reference is kafka-python itself: its ``Fetcher.PartitionRecords`` over the same bytes (the
path the tail took before), each ConsumerRecord decoded with ``decode_record``.  The batches are
built with kafka-python's own v2 builder, so the layout is not this code's idea of it.
"""

from __future__ import annotations

import itertools
import struct
from types import SimpleNamespace
from typing import Any

import kafka.errors as Errors
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import Fetcher
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from tests.fixtures.lanes import examples
from tests.kafka.test_txnlog import EMPTY, KEY, ONGOING_ONE_PARTITION, PREPARE_COMMIT_TWO
from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord
from txnwatch.kafka import txnlog_batches
from txnwatch.kafka.txnlog import decode_record

TP = TopicPartition("__transaction_state", 7)
VALUES = [EMPTY, ONGOING_ONE_PARTITION, PREPARE_COMMIT_TWO]
OTHER_KEY = struct.pack(">hh", 0, 5) + b"other"


def batch(base_offset: int, records: list[tuple[bytes | None, bytes | None]], *, codec: int = 0,
          headers: list[tuple[str, bytes]] | None = None, first_ts: int = 1_700_000_000_000,
          log_append_time: bool = False, control: bool = False, offset_step: int = 1) -> bytes:
    """One v2 batch from kafka-python's builder; ``offset_step`` > 1 leaves gaps as compaction does."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        builder.append(i * offset_step, timestamp=first_ts + 3 * i, key=key, value=value, headers=headers or [])
    raw = bytearray(builder.build())
    struct.pack_into(">q", raw, 0, base_offset)
    if log_append_time or control:
        attributes = struct.unpack_from(">h", raw, 21)[0] | (0x08 if log_append_time else 0) | (0x20 if control
                                                                                                  else 0)
        struct.pack_into(">h", raw, 21, attributes)
        struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    return bytes(raw)


def kafka_python(data: bytes, fetch_offset: int = 0) -> tuple[list[TxnLogRecord], list[RequestError], int]:
    """What the tail did before: kafka-python's records, each decoded."""
    part = Fetcher.PartitionRecords(fetch_offset, TP, MemoryRecords(data))
    problems: list[RequestError] = []
    out = [txnlog_batches.as_record(decode_record(r.key, r.value, TP.partition, r.offset, r.timestamp), TP.partition,
                                    r.offset, r.timestamp, r.value, problems) for r in part.take()]
    return out, problems, part.next_fetch_offset


def installed(data: bytes, fetch_offset: int = 0) -> tuple[list[TxnLogRecord], list[RequestError], int]:
    """The same bytes through kafka-python's PartitionRecords as install() changes it."""
    problems: list[RequestError] = []
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    assert txnlog_batches.install(consumer, decode_record, problems)
    part = consumer._fetcher.PartitionRecords(fetch_offset, TP, MemoryRecords(data))
    # Plain v2 bytes take this module's walk; anything else kafka-python's (itertools.dropwhile over its records).
    assert isinstance(part.record_iterator, itertools.dropwhile) is not txnlog_batches.plain_v2(data)
    out = part.take()
    assert all(type(r) is TxnLogRecord for r in out)
    return out, problems, part.next_fetch_offset


MIXED = b"".join([
    batch(0, [(KEY, EMPTY)]),
    batch(1, [(KEY, ONGOING_ONE_PARTITION), (OTHER_KEY, PREPARE_COMMIT_TWO), (KEY, None)]),
    batch(4, [(None, EMPTY), (b"\x00\x01bad", EMPTY), (KEY, b"\x00\x01\x02")]),  # no id, a bad key, a bad value
    batch(7, [(b"\x00", b"")], control=True),
    batch(8, [(OTHER_KEY, EMPTY)], headers=[("h", b"v"), ("n", b"")]),
    batch(9, [(KEY, PREPARE_COMMIT_TWO)], log_append_time=True),
    batch(10, [(KEY, EMPTY), (KEY, ONGOING_ONE_PARTITION)], offset_step=3),  # offsets 10 and 13, 11-12 compacted
    batch(14, [(KEY, ONGOING_ONE_PARTITION * 3)]),  # a value whose length takes two varint bytes (undecodable)
])


def test_the_same_records_problems_and_next_offset_as_kafka_python() -> None:
    fast, reference = installed(MIXED), kafka_python(MIXED)
    assert fast == reference
    records, problems, next_offset = fast
    assert [r.offset for r in records] == [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 13, 14]  # the control batch is skipped
    assert next_offset == 15
    assert len(problems) == 2 and records[4].kind is TxnLogKind.UNDECODABLE and records[4].transactional_id == ""
    assert records[3].kind is TxnLogKind.TOMBSTONE and records[6].kind is TxnLogKind.UNDECODABLE
    assert records[0].timestamp_ms == 1_700_000_000_000 and records[2].timestamp_ms == 1_700_000_000_003


def test_a_fetch_from_the_middle_of_a_batch_skips_what_lies_before() -> None:
    assert installed(MIXED, fetch_offset=2) == kafka_python(MIXED, fetch_offset=2)
    assert installed(MIXED, fetch_offset=2)[0][0].offset == 2


def test_a_batch_cut_short_by_the_fetch_size_is_left_for_the_next_fetch() -> None:
    for cut in (1, 30, 70):
        data = MIXED[:-cut]
        assert installed(data) == kafka_python(data)
        assert installed(data)[2] == 14


def test_a_compressed_batch_goes_through_kafka_python() -> None:
    data = batch(0, [(KEY, EMPTY)]) + batch(1, [(KEY, ONGOING_ONE_PARTITION), (KEY, PREPARE_COMMIT_TWO)], codec=1)
    assert not txnlog_batches.plain_v2(data) and txnlog_batches.plain_v2(MIXED)
    assert installed(data) == kafka_python(data)
    assert [r.offset for r in installed(data)[0]] == [0, 1, 2]


def test_a_damaged_batch_fails_its_crc_as_in_kafka_python() -> None:
    data = bytearray(MIXED)
    data[80] ^= 0x01  # inside the first batch's record
    with pytest.raises(Errors.CorruptRecordError):
        kafka_python(bytes(data))
    with pytest.raises(Errors.CorruptRecordError):
        installed(bytes(data))


def test_records_before_a_damaged_batch_still_come_back_first() -> None:
    good = batch(0, [(KEY, EMPTY)])
    damaged = bytearray(batch(1, [(KEY, ONGOING_ONE_PARTITION)]))
    damaged[-3] ^= 0x40
    problems: list[RequestError] = []
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    txnlog_batches.install(consumer, decode_record, problems)
    part = consumer._fetcher.PartitionRecords(0, TP, MemoryRecords(good + bytes(damaged)))
    assert [r.offset for r in part.take()] == [0]
    with pytest.raises(Errors.CorruptRecordError):
        part.take()


def test_a_read_committed_consumer_keeps_kafka_pythons_aborted_transaction_filter() -> None:
    problems: list[RequestError] = []
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    txnlog_batches.install(consumer, decode_record, problems)
    part = consumer._fetcher.PartitionRecords(0, TP, MemoryRecords(MIXED), isolation_level=1)
    assert isinstance(part.record_iterator, itertools.dropwhile)  # kafka-python's own walk, not unpack()
    assert part.take() == kafka_python(MIXED)[0]


def test_install_declines_a_fetcher_it_was_not_written_for() -> None:
    class Other:
        def __init__(self, tp: Any, records: Any) -> None:
            pass

        def _unpack_records(self) -> None:
            pass

    unchanged = SimpleNamespace(PartitionRecords=Other)
    assert not txnlog_batches.install(SimpleNamespace(_fetcher=unchanged), decode_record, [])
    assert unchanged.PartitionRecords is Other
    assert not txnlog_batches.install(SimpleNamespace(), decode_record, [])


@settings(max_examples=examples(150), deadline=None)
@given(records=st.lists(st.tuples(st.one_of(st.none(), st.just(KEY), st.binary(max_size=80)),
                                  st.one_of(st.none(), st.sampled_from(VALUES), st.binary(max_size=200))),
                        min_size=1, max_size=6),
       first_ts=st.integers(0, 2**41), log_append_time=st.booleans())
def test_any_records_come_out_as_kafka_python_gives_them(records: list[tuple[bytes | None, bytes | None]],
                                                         first_ts: int, log_append_time: bool) -> None:
    data = batch(5, records, first_ts=first_ts, log_append_time=log_append_time) + batch(5 + len(records), records)
    assert installed(data) == kafka_python(data)


def test_the_installed_kafka_pythons_consumer_takes_the_batch_walk() -> None:
    """On the consumer TransactionLogTail builds (kafka-python as pinned), install() takes hold: were it to
    decline, the tail would still be right, only as slow as before, and nothing else would say so."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers="127.0.0.1:1", api_version=(3, 0), group_id=None)
    try:
        assert txnlog_batches.install(consumer, decode_record, [])
        part = consumer._fetcher.PartitionRecords(0, TP, MemoryRecords(MIXED))
        assert not isinstance(part.record_iterator, itertools.dropwhile)
        assert part.take() == kafka_python(MIXED)[0]
    finally:
        consumer.close()
