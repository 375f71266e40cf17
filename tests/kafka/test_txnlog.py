"""Decoding __transaction_state records, and tailing it on a real cluster."""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka import KafkaProducer

from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord, TxnState
from txnwatch.kafka import ClusterConnectionSettings, txnlog
from txnwatch.kafka.errors import CORRUPT
from txnwatch.kafka.txnlog import TransactionLogTail, decode_record

# Captured from a Kafka 4.1.1 coordinator: transactional id "tl-xe2caf".
KEY = bytes.fromhex("00000009746c2d786532636166")
EMPTY = bytes.fromhex("000100000000000000000000000027100000000001a205b9b471ffffffffffffffff00")
ONGOING_ONE_PARTITION = bytes.fromhex(
    "00010000000000000000000000002710010207786532636166020000000000000001a205b9b4c4000001a205b9b4c400")
PREPARE_COMMIT_TWO = bytes.fromhex(
    "0001000000000000000000000000271002020778653263616603000000000000000100000001a205b9b54f000001a205b9b4c400")


def entry(key: bytes | None, value: bytes | None) -> TxnLogRecord:
    decoded = decode_record(key, value, 6, 42, 1_000)
    assert isinstance(decoded, TxnLogRecord), decoded
    return decoded


def value_of(key: bytes | None, value: bytes | None) -> TxnLogRecord:
    decoded = entry(key, value)
    assert decoded.kind is TxnLogKind.VALUE, decoded
    return decoded


def test_captured_records() -> None:
    empty = value_of(KEY, EMPTY)
    assert empty.transactional_id == "tl-xe2caf" and (empty.log_partition, empty.offset) == (6, 42)
    assert empty.state is TxnState.EMPTY and empty.value_version == 1 and empty.problem is None
    assert (empty.producer_id, empty.producer_epoch, empty.timeout_ms) == (0, 0, 10_000)
    assert empty.start_ms is None and empty.partitions == ()

    ongoing = value_of(KEY, ONGOING_ONE_PARTITION)
    assert ongoing.state is TxnState.ONGOING
    assert ongoing.partitions == (("xe2caf", 0),)
    assert ongoing.start_ms == ongoing.last_update_ms == 0x1A205B9B4C4

    prepare = value_of(KEY, PREPARE_COMMIT_TWO)
    assert prepare.state is TxnState.PREPARE_COMMIT
    assert prepare.partitions == (("xe2caf", 0), ("xe2caf", 1))
    assert prepare.start_ms == ongoing.start_ms and prepare.last_update_ms > ongoing.last_update_ms
    assert prepare.at_ms == prepare.last_update_ms


def test_tombstone_is_an_expired_id() -> None:
    tombstone = entry(KEY, None)
    assert tombstone.kind is TxnLogKind.TOMBSTONE and tombstone.transactional_id == "tl-xe2caf"
    assert tombstone.at_ms == 1_000


def _v0(status: int, partitions: dict[str, list[int]] | None) -> bytes:
    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    body = struct.pack(">hqhib", 0, 77, 4, 30_000, status)
    if partitions is None:
        body += struct.pack(">i", -1)
    else:
        body += struct.pack(">i", len(partitions))
        for topic, ids in partitions.items():
            body += string(topic) + struct.pack(">i", len(ids)) + b"".join(struct.pack(">i", i) for i in ids)
    return body + struct.pack(">qq", 2_000, 1_500)


def test_version_zero_values() -> None:
    value = value_of(KEY, _v0(7, {"orders": [3, 5]}))
    assert value.state is TxnState.PREPARE_EPOCH_FENCE and value.value_version == 0
    assert (value.producer_id, value.producer_epoch, value.timeout_ms, value.start_ms) == (77, 4, 30_000, 1_500)
    assert value.partitions == (("orders", 3), ("orders", 5))
    assert value_of(KEY, _v0(6, None)).state is TxnState.DEAD


TAGS = (b"\x03" + b"\x00\x08" + struct.pack(">q", 11) + b"\x01\x08" + struct.pack(">q", 12)
        + b"\x02\x02" + struct.pack(">h", 2))


def test_tagged_fields_of_version_one() -> None:
    value = value_of(KEY, EMPTY[:-1] + TAGS)
    assert (value.previous_producer_id, value.next_producer_id, value.client_transaction_version) == (11, 12, 2)
    assert value.unknown_tags == () and value.problem is None


def test_unknown_tagged_fields_are_kept_raw() -> None:
    tags = b"\x02" + b"\x02\x02" + struct.pack(">h", 2) + b"\x07\x03abc"
    value = value_of(KEY, EMPTY[:-1] + tags)
    assert value.client_transaction_version == 2 and value.unknown_tags == ((7, b"abc"),)


def _tag(tag: int, raw: bytes) -> bytes:
    return bytes([tag, len(raw)]) + raw


def _tagged(*tags: bytes) -> bytes:
    """EMPTY (a 4.1.1 Empty record, version 1) with these tagged fields instead of its none."""
    return EMPTY[:-1] + bytes([len(tags)]) + b"".join(tags)


@pytest.mark.parametrize(("tags", "expected"), [
    pytest.param([_tag(2, struct.pack(">h", 2))], (None, None, None, 2),
                 id="kafka-4.1-writes-only-the-client-version-KAFKA-20310"),
    pytest.param([_tag(0, struct.pack(">q", 11)), _tag(1, struct.pack(">q", 12)), _tag(2, struct.pack(">h", 2)),
                  _tag(3, struct.pack(">h", 7))], (11, 12, 7, 2), id="every-known-tag"),
    pytest.param([_tag(3, struct.pack(">h", 0))], (None, None, 0, 0), id="next-epoch-zero-is-an-epoch"),
    pytest.param([_tag(0, struct.pack(">q", -1)), _tag(3, struct.pack(">h", -1))], (None, None, None, 0),
                 id="kafkas-not-set-written-out"),
])
def test_known_tags_fill_their_fields(tags: list[bytes], expected: tuple[Any, ...]) -> None:
    value = value_of(KEY, _tagged(*tags))
    assert (value.previous_producer_id, value.next_producer_id, value.next_producer_epoch,
            value.client_transaction_version) == expected
    assert value.unknown_tags == () and value.problem is None
    assert value.state is TxnState.EMPTY and value.producer_epoch == 0


def test_a_value_without_tags_has_every_tag_unset() -> None:
    """The decoder starts a record's tagged fields at TxnLogRecord's defaults: they must be VALUE_TAGS' unset
    values, or a tag added to the table would read differently absent and written as "not set"."""
    from txnwatch.kafka.txnlog import VALUE_TAGS

    value = value_of(KEY, EMPTY)
    assert {t.field: getattr(value, t.field) for t in VALUE_TAGS.values()} == {
        t.field: TxnLogRecord._field_defaults[t.field] for t in VALUE_TAGS.values()} == {
        t.field: t.unset for t in VALUE_TAGS.values()}


def test_next_producer_epoch_of_kafka_4_3_is_not_an_unknown_field() -> None:
    """Kafka 4.3 and 4.4 define tag 3 (NextProducerEpoch, int16): it used to be reported as an unknown field."""
    value = value_of(KEY, _tagged(_tag(1, struct.pack(">q", 12)), _tag(3, struct.pack(">h", 5))))
    assert (value.next_producer_id, value.next_producer_epoch, value.unknown_tags) == (12, 5, ())


@pytest.mark.parametrize(("tags", "unknown"), [
    pytest.param([_tag(4, b"\x00\x09")], ((4, b"\x00\x09"),), id="a-tag-not-yet-defined"),
    pytest.param([_tag(3, b"\x00\x00\x00\x05")], ((3, b"\x00\x00\x00\x05"),), id="known-tag-of-another-size"),
    pytest.param([_tag(0, struct.pack(">q", 11)), _tag(9, b"x")], ((9, b"x"),), id="known-beside-unknown"),
])
def test_other_tags_are_kept_raw(tags: list[bytes], unknown: tuple[tuple[int, bytes], ...]) -> None:
    value = value_of(KEY, _tagged(*tags))
    assert value.unknown_tags == unknown and value.problem is None


def test_newer_value_version_is_read_with_the_v1_layout_and_flagged() -> None:
    value = value_of(KEY, b"\x00\x02" + EMPTY[2:-1] + TAGS)
    assert value.state is TxnState.EMPTY and value.value_version == 2 and value.client_transaction_version == 2
    assert value.problem is not None and "version 2" in value.problem


def test_unknown_status_is_an_unknown_state_with_its_raw_byte() -> None:
    value = value_of(KEY, EMPTY[:16] + b"\x2a" + EMPTY[17:])
    assert value.state is TxnState.UNKNOWN and value.raw_status == 42 and value.producer_id == 0


@pytest.mark.parametrize("value", [
    pytest.param(EMPTY[:-3], id="cut-short"),
    pytest.param(EMPTY + b"\x00", id="trailing-garbage"),
    pytest.param(b"\x00\x09" + EMPTY[2:-1] + b"\x01\x05\xff", id="new-version-new-layout"),
    pytest.param(b"\xff\xff" + EMPTY[2:], id="negative-version"),
])
def test_undecodable_values_keep_their_id_and_raw_bytes(value: bytes) -> None:
    decoded = entry(KEY, value)
    assert decoded.kind is TxnLogKind.UNDECODABLE and decoded.transactional_id == "tl-xe2caf"
    assert decoded.raw_value == value and decoded.problem


@pytest.mark.parametrize(("key", "value"), [
    (None, EMPTY),
    (b"\x00\x01\x00\x02ab", EMPTY),             # a key of another record type
    (b"\x00\x00\x00\x02\xff\xfe", EMPTY),        # not UTF-8
    (b"\x00\x00\x00\x09ab", EMPTY),             # key cut short
])
def test_records_naming_no_id_are_reported(key: bytes | None, value: bytes) -> None:
    decoded = decode_record(key, value, 3, 9, -1)
    assert isinstance(decoded, RequestError)
    assert decoded.name == CORRUPT and decoded.target == "__transaction_state-3@9"


@pytest.mark.lab
def test_tail_sees_every_transition(lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    tid = f"txnwatch-txnlog-{uuid.uuid4().hex[:8]}"
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)
    with TransactionLogTail(settings, from_beginning=False) as tail:
        assert tail.partitions > 0
        assert tail._consumer.metrics() is None  # kafka-python's sensors are off: nothing reads them (issue 25)
        producer = KafkaProducer(bootstrap_servers=lab_cluster.bootstrap_servers, transactional_id=tid,
                                 transaction_timeout_ms=10_000)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"v", partition=0)
            producer.send(topic, b"v", partition=1)
            producer.commit_transaction()
        finally:
            producer.close()
        seen: list[TxnLogRecord] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(e.state is TxnState.COMPLETE_COMMIT for e in seen):
            entries, problems = tail.read(500)
            assert problems == []
            seen.extend(e for e in entries if e.transactional_id == tid)
        positions = tail.positions()
    states = [e.state for e in seen if e.kind is TxnLogKind.VALUE]
    assert states[0] is TxnState.EMPTY and states[-2:] == [TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    assert TxnState.ONGOING in states
    prepare = next(e for e in seen if e.state is TxnState.PREPARE_COMMIT)
    assert set(prepare.partitions) == {(topic, 0), (topic, 1)}
    assert [e.offset for e in seen] == sorted(e.offset for e in seen)
    assert positions[seen[-1].log_partition] == seen[-1].offset + 1


@given(key=st.one_of(st.none(), st.binary(max_size=40)), value=st.one_of(st.none(), st.binary(max_size=120)))
def test_any_bytes_decode_or_are_reported(key: bytes | None, value: bytes | None) -> None:
    assert isinstance(decode_record(key, value, 0, 0, 0), (TxnLogRecord, RequestError))


@given(cut=st.integers(min_value=0, max_value=len(PREPARE_COMMIT_TWO) - 1), flip=st.integers(0, 255))
def test_damaged_real_records_decode_or_are_reported(cut: int, flip: int) -> None:
    damaged = PREPARE_COMMIT_TWO[:cut] + bytes([flip]) + PREPARE_COMMIT_TWO[cut + 1:]
    decoded = decode_record(KEY, damaged, 0, 0, 0)
    assert isinstance(decoded, TxnLogRecord) and decoded.transactional_id == "tl-xe2caf"


@pytest.mark.lab
def test_full_reads_shorten_the_consumers_fetch_wait_and_a_short_one_restores_it(
        lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    """kafka/txnlog.FetchWait on the real consumer: kafka-python's fetcher reads the wait the tail sets (its own
    config, read for every fetch request), short while reads fill the poll, the operator's once one does not."""
    topic = new_topic(partitions=1)
    producer = KafkaProducer(bootstrap_servers=lab_cluster.bootstrap_servers, linger_ms=20)
    try:
        for i in range(2_500):
            producer.send(topic, key=b"k", value=b"v%d" % i, partition=0)
        producer.flush()
    finally:
        producer.close()
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)
    with TransactionLogTail(settings, topic=topic, from_beginning=True, max_poll_records=1_000,
                            fetch_wait_ms=1_500) as tail:
        fetcher_config = tail._consumer._fetcher.config
        assert fetcher_config["fetch_max_wait_ms"] == txnlog.BUSY_FETCH_WAIT_MS  # opened as if behind
        sizes: list[tuple[int, int]] = []
        deadline = time.monotonic() + 30
        while sum(n for n, _ in sizes) < 2_500 and time.monotonic() < deadline:
            records, _ = tail.read(500)
            if records:
                sizes.append((len(records), fetcher_config["fetch_max_wait_ms"]))
        assert sum(n for n, _ in sizes) == 2_500  # every record (undecodable here: not the transaction log's)
        assert any(n == 1_000 for n, _ in sizes), sizes
        assert all(wait == (txnlog.BUSY_FETCH_WAIT_MS if n == 1_000 else 1_500) for n, wait in sizes), sizes
        assert sizes[-1][0] < 1_000 and sizes[-1][1] == 1_500
        tail.read(100)  # nothing more: still the operator's wait
        assert fetcher_config["fetch_max_wait_ms"] == 1_500
