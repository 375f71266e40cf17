"""The compiled walk of the transaction log's batches (``kafka/_txnlog_walk.c``) gives what the Python walk gives.

The reference is :func:`txnwatch.kafka.txnlog_batches.unpack` with :func:`txnwatch.kafka.txnlog.decode_in`, the
tail's walk without the compiled part (tests/kafka/test_txnlog_batches.py holds that one against kafka-python's
own records).  Each fetch is taken one record at a time through kafka-python's ``PartitionRecords`` as
``install`` changes it, and after every record the consumer's next offset and leader epoch are compared too:
kafka-python takes its position from them whenever a poll stops.  The fetches are random: valid values with
random topics and tags, undecodable ones, tombstones, headers, control batches, compaction's gaps, other leader
epochs, damaged bytes and fetches cut short.
"""

from __future__ import annotations

import struct
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import Fetcher
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c

from tests.fixtures.lanes import examples
from tests.kafka.test_txnlog import EMPTY, KEY, ONGOING_ONE_PARTITION, PREPARE_COMMIT_TWO
from tests.kafka.test_txnlog_batches import MIXED, OTHER_KEY, TP, batch
from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord
from txnwatch.kafka import txnlog_batches
from txnwatch.kafka.txnlog import decode_in, decode_record

Step = tuple[Any, ...]


def test_this_install_has_the_compiled_walk() -> None:
    """`make test` installs txnwatch with its C walk (setup.py): were it missing, the tail would still be right,
    only slower, and nothing else would say so."""
    assert txnlog_batches.WALK is not None
    from txnwatch.kafka import _txnlog_walk

    assert (_txnlog_walk.END, _txnlog_walk.MORE, _txnlog_walk.DEFER) == (
        txnlog_batches.WALK_END, txnlog_batches.WALK_MORE, txnlog_batches.WALK_DEFER)


def steps(data: bytes, fetch_offset: int = 0, *, compiled: bool,
          check_crcs: bool = True) -> tuple[list[Step], list[RequestError]]:
    """Every record of one fetch, taken one at a time, with the consumer's position after each; then how it
    ended (a CorruptRecordError's message, or the final position and counters)."""
    problems: list[RequestError] = []
    consumer = SimpleNamespace(_fetcher=SimpleNamespace(PartitionRecords=Fetcher.PartitionRecords))
    assert txnlog_batches.install(consumer, decode_record, problems, decode_in,
                                  walk=txnlog_batches.WALK if compiled else None)
    part = consumer._fetcher.PartitionRecords(fetch_offset, TP, MemoryRecords(data), check_crcs=check_crcs)
    out: list[Step] = []
    while part:
        try:
            got = part.take(1)
        except Exception as exc:  # kafka-python's own walk (a damaged magic byte) raises others
            out.append((type(exc), str(exc), part.next_fetch_offset))
            break
        if not got:
            break
        assert type(got[0]) is TxnLogRecord
        out.append((got[0], part.next_fetch_offset, part.leader_epoch))
    out.append(("end", part.next_fetch_offset, part.leader_epoch, part.records_read, part.bytes_read))
    return out, problems


def same(data: bytes, fetch_offset: int = 0, check_crcs: bool = True) -> list[Step]:
    """The compiled walk's steps, once they are the Python walk's.  Without CRC checks (``check_crcs``, kafka-python's
    setting) a damaged byte reaches the record walk itself."""
    compiled = steps(data, fetch_offset, compiled=True, check_crcs=check_crcs)
    reference = steps(data, fetch_offset, compiled=False, check_crcs=check_crcs)
    assert compiled[0] == reference[0]
    # The compiled walk notes a record's problem when it walks its chunk, the Python walk when it is taken: the
    # same problems, once each, in the same order.
    assert compiled[1] == reference[1]
    return compiled[0]


def with_epoch(raw: bytes, epoch: int) -> bytes:
    """A batch with another partition leader epoch (bytes 12-15, outside the CRC)."""
    out = bytearray(raw)
    struct.pack_into(">i", out, 12, epoch)
    return bytes(out)


def test_the_mixed_fetch_of_the_batch_tests() -> None:
    records = [s[0] for s in same(MIXED) if isinstance(s[0], TxnLogRecord)]
    assert [r.offset for r in records] == [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 13, 14]
    assert records[0].state is not None and records[0].kind is TxnLogKind.VALUE


@pytest.mark.parametrize("fetch_offset", [0, 1, 2, 5, 9, 12, 14, 15])
def test_a_fetch_from_anywhere_in_it(fetch_offset: int) -> None:
    same(MIXED, fetch_offset)


@pytest.mark.parametrize("cut", [1, 30, 61, 70, 200])
def test_a_fetch_cut_short(cut: int) -> None:
    same(MIXED[:-cut])


@pytest.mark.parametrize("check_crcs", [True, False])
def test_damaged_bytes_anywhere_raise_or_decode_as_the_python_walk_does(check_crcs: bool) -> None:
    for at in range(len(MIXED)):
        for flip in (0x01, 0x5A, 0x80):
            data = bytearray(MIXED)
            data[at] ^= flip
            same(bytes(data), check_crcs=check_crcs)


def test_a_change_of_leader_epoch_is_seen_at_its_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    data = (with_epoch(batch(0, [(KEY, EMPTY)]), 3) + with_epoch(batch(1, [(KEY, ONGOING_ONE_PARTITION)]), 3)
            + with_epoch(batch(2, [(KEY, PREPARE_COMMIT_TWO)]), 4))
    epochs = [s[2] for s in same(data) if isinstance(s[0], TxnLogRecord)]
    assert epochs == [3, 3, 4]


def test_chunks_stop_between_batches_and_go_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(txnlog_batches, "WALK_CHUNK", 2)
    data = b"".join(batch(i, [(KEY, EMPTY)]) for i in range(7))
    assert [s[0].offset for s in same(data) if isinstance(s[0], TxnLogRecord)] == list(range(7))


def test_the_compiled_walk_reads_the_usual_record_itself() -> None:
    """The usual record is built in C, not handed back: the fallback is never called for it."""
    calls: list[int] = []

    def fallback(*args: Any) -> None:
        calls.append(args[5])
        raise AssertionError("handed back")

    assert txnlog_batches.WALK is not None
    data = batch(0, [(KEY, EMPTY), (KEY, ONGOING_ONE_PARTITION), (OTHER_KEY, PREPARE_COMMIT_TWO)])
    records, pos, status, _epoch, next_offset, read, _size = txnlog_batches.WALK(
        data, 0, TP.partition, 0, True, fallback, 100)
    assert not calls and status == txnlog_batches.WALK_END and pos == len(data) and next_offset == 3 and read == 3
    assert records == [decode_in(*args) for args in _in_place_args(data)]
    assert all(type(r) is TxnLogRecord for r in records)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=300))
def test_the_walks_crc32c_is_kafka_pythons(data: bytes) -> None:
    """The walk checks each batch's CRC-32C itself (the CPU's crc32 instruction, or tables): kafka-python's sum."""
    from txnwatch.kafka import _txnlog_walk

    assert _txnlog_walk.crc32c(data) == calc_crc32c(data)
    assert _txnlog_walk.crc32c(data + bytes(4096)) == calc_crc32c(data + bytes(4096))  # the long loop too


def _in_place_args(data: bytes) -> list[tuple[Any, ...]]:
    """decode_in's arguments for each record of a fetch, found by the Python walk."""
    seen: list[tuple[Any, ...]] = []

    def spy(*args: Any) -> TxnLogRecord | RequestError:
        seen.append(args)
        return decode_in(*args)

    owner = SimpleNamespace(fetch_offset=0, leader_epoch=-1, next_fetch_offset=0, records_read=0, bytes_read=0,
                            topic_partition=TP)
    list(txnlog_batches.unpack(owner, TP.partition, data, spy, [], True))
    return seen


# Random values: the layout Kafka 4 writes (TransactionLogValue v1), with what decode_in's fast path reads and
# what it hands on (other versions, unknown statuses, long or non-UTF-8 names, unknown or odd-sized tags).
def _compact(n: int) -> bytes:
    out = bytearray()
    n += 1
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


usual_names = st.text(min_size=1, max_size=12).map(lambda s: s.encode()).filter(lambda b: len(b) < 0x7F)
odd_names = st.one_of(st.just(b""), st.just(b"\xff\xfe"), st.binary(min_size=120, max_size=140))
known_tags = st.one_of(
    st.tuples(st.sampled_from([0, 1]), st.integers(-2**63, 2**63 - 1).map(lambda v: struct.pack(">q", v))),
    st.tuples(st.sampled_from([2, 3]), st.integers(-2**15, 2**15 - 1).map(lambda v: struct.pack(">h", v))))
odd_tags = st.tuples(st.integers(0, 200), st.binary(max_size=9))


@st.composite
def values(draw: st.DrawFn) -> bytes:
    """Most often a value the fast path reads (so the C builds the record); else anything near it."""
    usual = draw(st.integers(0, 9)) < 6
    version = 1 if usual else draw(st.sampled_from([1, 0, 2]))
    status = draw(st.integers(0, 7) if usual else st.integers(-2, 9))
    head = struct.pack(">hqhib", version, draw(st.integers(-1, 2**62)), draw(st.integers(-1, 32767)),
                       draw(st.integers(0, 900_000)), status)
    chosen = draw(st.lists(st.tuples(usual_names if usual else st.one_of(usual_names, odd_names),
                                     st.lists(st.integers(-2**31, 2**31 - 1), max_size=4)), max_size=3))
    body = _compact(len(chosen)) if usual or draw(st.booleans()) or not chosen else b"\x00"
    for name, ids in chosen:
        body += _compact(len(name)) + name + _compact(len(ids)) + b"".join(struct.pack(">i", i) for i in ids) + b"\x00"
    body += struct.pack(">qq", draw(st.integers(-1, 2**45)), draw(st.integers(-1, 2**45)))
    chosen_tags = draw(st.lists(known_tags if usual else st.one_of(known_tags, odd_tags), max_size=4))
    body += _compact(len(chosen_tags) - 1) + b"".join(bytes([t, len(v)]) + v for t, v in chosen_tags)
    value = head + body
    if not usual and draw(st.integers(0, 3)) == 0:  # damaged: cut short or with a byte after it
        value = value[:-1] if draw(st.booleans()) else value + b"\x00"
    return value


keys = st.one_of(st.just(KEY), st.just(OTHER_KEY), st.none(), st.binary(max_size=12),
                 st.text(max_size=70).map(lambda s: struct.pack(">hh", 0, len(s.encode())) + s.encode()))
records = st.lists(st.tuples(keys, st.one_of(values(), st.none(), st.sampled_from(
    [EMPTY, ONGOING_ONE_PARTITION, PREPARE_COMMIT_TWO]))), min_size=1, max_size=4)


@st.composite
def fetches(draw: st.DrawFn) -> tuple[bytes, int]:
    data, offset = b"", draw(st.integers(0, 3))
    for _ in range(draw(st.integers(1, 6))):
        rows = draw(records)
        raw = batch(offset, rows, headers=[("h", b"v")] if draw(st.integers(0, 9)) == 0 else None,
                    log_append_time=draw(st.booleans()), control=draw(st.integers(0, 11)) == 0,
                    offset_step=draw(st.sampled_from([1, 1, 2])), first_ts=draw(st.integers(-5, 2**41)))
        data += with_epoch(raw, draw(st.sampled_from([0, 0, 1, 7])))
        offset += len(rows) * 2
    if draw(st.integers(0, 7)) == 0:  # a damaged byte
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([data[at] ^ draw(st.integers(1, 255))]) + data[at + 1:]
    if draw(st.integers(0, 5)) == 0:  # cut short by the fetch size
        data = data[:draw(st.integers(0, len(data)))]
    return data, draw(st.integers(0, offset))


@settings(max_examples=examples(400), deadline=None)
@given(fetch=fetches(), chunk=st.sampled_from([1, 2, 1000]), check_crcs=st.booleans())
def test_any_fetch_walks_as_the_python_walk(fetch: tuple[bytes, int], chunk: int, check_crcs: bool) -> None:
    data, fetch_offset = fetch
    before = txnlog_batches.WALK_CHUNK
    txnlog_batches.WALK_CHUNK = chunk
    try:
        same(data, fetch_offset, check_crcs)
    finally:
        txnlog_batches.WALK_CHUNK = before


@settings(max_examples=examples(300), deadline=None)
@given(fetch=fetches(), cut=st.integers(0, 400))
def test_the_compiled_plain_v2_answers_as_the_python_one(fetch: tuple[bytes, int], cut: int) -> None:
    data = fetch[0]
    for candidate in (data, data[:cut], data + batch(99, [(KEY, EMPTY)], codec=1)):
        assert txnlog_batches.PLAIN_V2(candidate) is txnlog_batches.plain_v2(candidate)
