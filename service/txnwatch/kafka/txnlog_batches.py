"""``__transaction_state``'s record batches decoded straight from kafka-python's fetch, without its record objects.

kafka-python unpacks every fetched record through a copy of its batch (``DefaultRecordBatch``),
a ``DefaultRecord`` and a ``ConsumerRecord`` before the tail decodes the key and value.  The
coordinators write one record per batch, so on this log that per-batch and per-record work was
most of the tail's CPU (issue 25).  Here everything else stays kafka-python's (fetch requests and
sessions, positions, leader epochs and changes, errors, offset resets); only the step that unpacks
one partition's fetched bytes is replaced, on this one consumer (:func:`install`):

* message format v2 batches (all Kafka >= 0.11 writes) are walked in place: the header as
  Kafka's ``DefaultRecordBatch`` lays it out, the batch's CRC-32C checked with kafka-python's own
  ``calc_crc32c`` (the C ``crc32c`` package when installed), control batches skipped, and each
  record's key and value decoded where they lie (:func:`txnwatch.kafka.txnlog.decode_in`, the same answers as
  :func:`~txnwatch.kafka.txnlog.decode_record` without copying them out);
* a fetch holding anything else (a compressed batch, message format 0/1) goes through
  kafka-python's own unpacking, then the same decoding: the records come out the same.

The walk is compiled where txnwatch was installed with a C compiler (``_txnlog_walk.c``, :data:`WALK`):
it takes the batches and records Kafka writes on this log and hands every other batch to :func:`unpack`
and every other record to ``decode_in``, so the records are the same either way.  It checks the CRC-32C
itself (the same sum, tested against kafka-python's), and :data:`PLAIN_V2` is :func:`plain_v2` compiled.

A damaged batch raises kafka-python's ``CorruptRecordError`` where kafka-python would, so the tail
reacts as before.  kafka-python's internals are reached in this module only: :func:`install`, which says
False (and the tail keeps kafka-python's records) where they are not what this was written for, and
:func:`fetch_wait_control`, None where the fetch wait cannot be changed after the consumer is built.
"""

from __future__ import annotations

import inspect
import struct
from collections.abc import Callable, Iterator
from typing import Any

import kafka.errors as Errors
from kafka.record.util import calc_crc32c, decode_varint

from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord
from txnwatch.core.vocabulary import STATE_BY_ID

#: Why the compiled walk is missing (the ImportError), for the tail's one warning; None when it is there.
WALK_MISSING: str | None = None
try:
    from txnwatch.kafka import _txnlog_walk
except ImportError as exc:  # installed where no C compiler was (setup.py): the Python walk alone
    _txnlog_walk = None  # type: ignore[assignment]  # the stub types the module, this is its absence
    WALK_MISSING = str(exc)

Decode = Callable[[bytes | None, bytes | None, int, int, int | None], "TxnLogRecord | RequestError"]
#: (batch bytes, key at, key size, value at, value size, partition, offset, timestamp): the same as Decode on the
#: key and value that lie there (a size of -1: null), without copying them out (kafka/txnlog.py's decode_in).
DecodeIn = Callable[[bytes, int, int, int, int, int, int, "int | None"], "TxnLogRecord | RequestError"]

_HEAD = struct.Struct(">qiibIhiqqqhii")  # DefaultRecordBatch's header: 61 bytes
_HEAD_SIZE = _HEAD.size
_LOG_OVERHEAD = 12  # base offset, length
_MAGIC_AT = 16
_ATTRIBUTES_AT = 21  # the CRC covers the batch from here on
_CODEC_MASK, _LOG_APPEND_TIME, _CONTROL = 0x07, 0x08, 0x20
_BAD = (ValueError, IndexError, struct.error)

#: The compiled walk (``_txnlog_walk.walk``), None where txnwatch was installed without it.  It reads records as
#: :func:`txnwatch.kafka.txnlog.decode_in` does, so it is only for that decoder (``install``'s ``walk``).
Walk = Callable[..., tuple[list[TxnLogRecord], int, int, int, "int | None", int, int]]
WALK: Walk | None = None
#: Whether a fetch is all plain v2 batches (:func:`plain_v2`), compiled where the walk is.
PLAIN_V2: Callable[[bytes], bool]
if _txnlog_walk is not None:
    _txnlog_walk.configure(TxnLogRecord, STATE_BY_ID, TxnLogKind.VALUE)
    WALK = _txnlog_walk.walk
#: What the compiled walk says where it stopped (the C source's WALK_END, WALK_MORE, WALK_DEFER): no whole batch
#: left, call again from there, or the batch there is for :func:`unpack`.
WALK_END, WALK_MORE, WALK_DEFER = 0, 1, 2
#: Records the compiled walk builds before handing them on: a catching-up fetch of 4 MiB holds ~28,000.
WALK_CHUNK = 1_000


def plain_v2(data: bytes | memoryview) -> bool:
    """Whether every whole batch of a fetched partition is message format v2 and uncompressed."""
    pos, end = 0, len(data)
    while pos + _HEAD_SIZE <= end:
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if (length < _HEAD_SIZE - _LOG_OVERHEAD or data[pos + _MAGIC_AT] != 2
                or data[pos + _ATTRIBUTES_AT + 1] & _CODEC_MASK):
            return False  # kafka-python reads it, or says what is wrong with it
        pos += _LOG_OVERHEAD + length
    return True


PLAIN_V2 = _txnlog_walk.plain_v2 if _txnlog_walk is not None else plain_v2


def as_record(decoded: TxnLogRecord | RequestError, partition: int, offset: int, timestamp: int | None,
              value: bytes | None, problems: list[RequestError]) -> TxnLogRecord:
    """A record that names no id is kept as an undecodable record of no id (so it is counted and shown), and its
    problem is kept for the log."""
    if type(decoded) is TxnLogRecord:
        return decoded
    assert isinstance(decoded, RequestError)
    problems.append(decoded)
    return TxnLogRecord("", partition, offset, timestamp, TxnLogKind.UNDECODABLE, problem=decoded.message,
                        raw_value=value)


def _signed(data: bytes, pos: int) -> tuple[int, int]:
    """A zigzag varint (record fields), its one- and two-byte forms inline."""
    byte = data[pos]
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    second = data[pos + 1]
    if second < 0x80:
        raw = (byte & 0x7F) | (second << 7)
        return (raw >> 1) ^ -(raw & 1), pos + 2
    value, end = decode_varint(data, pos)
    return int(value), int(end)


def unpack(owner: Any, partition: int, data: bytes, decode_in: DecodeIn, problems: list[RequestError],
           check_crcs: bool, start: int = 0) -> Iterator[TxnLogRecord]:
    """The decoded records of the whole v2 batches of one partition's fetched bytes from ``start``, in offset order.

    ``owner`` is kafka-python's ``PartitionRecords`` for this fetch: its ``next_fetch_offset``,
    ``leader_epoch``, ``records_read`` and ``bytes_read`` are kept as kafka-python keeps them (the
    consumer's position after the fetch is taken from ``next_fetch_offset``)."""
    pos, end = start, len(data)
    view = memoryview(data)
    while pos + _HEAD_SIZE <= end:
        (base_offset, length, leader_epoch, _, crc, attributes, last_delta, first_ts, max_ts, _, _, _,
         count) = _HEAD.unpack_from(data, pos)
        batch_end = pos + _LOG_OVERHEAD + length
        if batch_end > end:
            break  # cut short by the fetch size: fetched again from here next time
        if check_crcs and calc_crc32c(view[pos + _ATTRIBUTES_AT:batch_end]) != crc:
            raise Errors.CorruptRecordError(f"Record batch for partition {owner.topic_partition} at offset "
                                            f"{base_offset} failed crc check")
        owner.leader_epoch = leader_epoch
        if attributes & _CONTROL:
            owner.next_fetch_offset = base_offset + last_delta + 1
            pos = batch_end
            continue
        log_append = attributes & _LOG_APPEND_TIME
        at = pos + _HEAD_SIZE
        skip_below = owner.fetch_offset
        try:
            for _ in range(count):
                # Zigzag varints; the one-byte ones (attributes, deltas, a key of an id under 60 bytes, headers)
                # inline, the rest through _signed: this loop runs once per record of the log.
                size, at = _signed(data, at)
                start = at
                byte = data[at + 1]  # after the attributes byte
                ts_delta, at = ((byte >> 1) ^ -(byte & 1), at + 2) if byte < 0x80 else _signed(data, at + 1)
                byte = data[at]
                offset_delta, at = ((byte >> 1) ^ -(byte & 1), at + 1) if byte < 0x80 else _signed(data, at)
                byte = data[at]
                key_size, at = ((byte >> 1) ^ -(byte & 1), at + 1) if byte < 0x80 else _signed(data, at)
                key_at = at
                if key_size > 0:
                    at += key_size
                byte = data[at]
                value_size, at = ((byte >> 1) ^ -(byte & 1), at + 1) if byte < 0x80 else _signed(data, at)
                value_at = at
                if value_size > 0:
                    at += value_size
                if data[at]:
                    headers, at = _signed(data, at)
                    for _ in range(headers):
                        name_size, at = _signed(data, at)
                        header_size, at = _signed(data, at + name_size)
                        at += max(header_size, 0)
                else:
                    at += 1
                if at - start != size or at > batch_end:
                    raise ValueError(f"record size {size} does not match its fields ({at - start} bytes)")
                offset = base_offset + offset_delta
                owner.records_read += 1
                owner.bytes_read += size
                owner.next_fetch_offset = offset + 1
                if offset < skip_below:
                    continue  # before the fetched offset (kafka-python skips these too)
                timestamp = max_ts if log_append else first_ts + ts_delta
                decoded = decode_in(data, key_at, key_size, value_at, value_size, partition, offset, timestamp)
                yield decoded if type(decoded) is TxnLogRecord else as_record(
                    decoded, partition, offset, timestamp, data[value_at:value_at + value_size] if value_size >= 0
                    else None, problems)
        except _BAD as exc:
            raise Errors.CorruptRecordError(f"Found invalid record structure in the batch at offset {base_offset} "
                                            f"of {owner.topic_partition}: {exc!r}") from None
        if at != batch_end:
            raise Errors.CorruptRecordError(f"{batch_end - at} unconsumed bytes after all records of the batch at "
                                            f"offset {base_offset} of {owner.topic_partition}")
        # v2 keeps the batch's last offset when compaction removed its last records: continue after it.
        owner.next_fetch_offset = base_offset + last_delta + 1
        pos = batch_end


def decoded_at(data: bytes, key_at: int, key_size: int, value_at: int, value_size: int, partition: int, offset: int,
               timestamp: int | None, decode_in: DecodeIn, problems: list[RequestError]) -> TxnLogRecord:
    """One record's key and value decoded where they lie, a record that names no id kept as :func:`as_record` does."""
    decoded = decode_in(data, key_at, key_size, value_at, value_size, partition, offset, timestamp)
    return decoded if type(decoded) is TxnLogRecord else as_record(
        decoded, partition, offset, timestamp, data[value_at:value_at + value_size] if value_size >= 0 else None,
        problems)


def walked(owner: Any, partition: int, data: bytes, decode_in: DecodeIn, problems: list[RequestError],
           check_crcs: bool, walk: Walk) -> Iterator[TxnLogRecord]:
    """:func:`unpack`'s records, the batches it can take walked by the compiled ``walk``, the rest by :func:`unpack`.

    Ends with ``owner.drain()``, as kafka-python's own walk does (it is the consumer's iterator itself: a
    generator less per record).  ``walk`` stops between batches after :data:`WALK_CHUNK` records and where the
    leader epoch changes, so the consumer's position and epoch are kafka-python's after every record handed on,
    as with :func:`unpack`.  A record it does not read as ``decode_in``'s fast path does is decoded by
    ``decode_in`` as it walks (so a record that names no id has its problem noted when its chunk is walked, not
    when it is taken)."""

    noted: list[tuple[TxnLogRecord, RequestError]] = []  # (record, problem) of the chunk being walked

    def fallback(data: bytes, key_at: int, key_size: int, value_at: int, value_size: int, offset: int,
                 timestamp: int) -> TxnLogRecord:
        found: list[RequestError] = []
        record = decoded_at(data, key_at, key_size, value_at, value_size, partition, offset, timestamp, decode_in,
                            found)
        noted.extend((record, problem) for problem in found)
        return record

    pos, skip_below = 0, owner.fetch_offset
    while True:
        records, pos, status, epoch, next_offset, read, size = walk(
            data, pos, partition, skip_below, check_crcs, fallback, WALK_CHUNK)
        if noted:  # only those of records handed on: a batch handed to unpack() is decoded there again
            kept = {id(record) for record in records}
            problems += [problem for record, problem in noted if id(record) in kept]
            noted.clear()
        if next_offset is not None:
            owner.leader_epoch = epoch
            for record in records:
                owner.next_fetch_offset = record[2] + 1  # its offset
                yield record
            owner.next_fetch_offset = next_offset
            owner.records_read += read
            owner.bytes_read += size
        if status != WALK_MORE:
            break
    if status == WALK_DEFER:
        yield from unpack(owner, partition, data, decode_in, problems, check_crcs, pos)
    owner.drain()


def fetch_wait_control(consumer: Any) -> Callable[[int], None] | None:
    """A setter of the longest a broker may hold ``consumer``'s next fetches (``fetch_max_wait_ms``), or None where
    this kafka-python's fetcher does not read it from its config for every fetch it sends (then it stays as built).

    kafka-python reads it from the fetcher's own config each time it builds a fetch request, so a change applies to
    the next fetch sent; the consumer's config and the fetches in flight are untouched."""
    fetcher = getattr(consumer, "_fetcher", None)
    config = getattr(fetcher, "config", None)
    if not isinstance(config, dict) or not isinstance(config.get("fetch_max_wait_ms"), int):
        return None

    def set_wait(ms: int) -> None:
        config["fetch_max_wait_ms"] = ms

    return set_wait


def install(consumer: Any, decode: Decode, problems: list[RequestError], decode_in: DecodeIn | None = None,
            walk: Walk | None = None) -> bool:
    """Make ``consumer.poll()`` return :class:`TxnLogRecord` (decoded by ``decode``) instead of ConsumerRecords.

    ``decode_in``, the same decoding reading the key and value where they lie in the batch, is what walks
    the batches in place (``decode`` on copies of them if not given); ``decode`` decodes kafka-python's records.
    ``walk`` (:data:`WALK`), given with :func:`txnwatch.kafka.txnlog.decode_in`, walks them compiled.

    Records that name no id are returned as undecodable and their problems appended to ``problems``.
    False where this kafka-python's fetcher is not the one this was written for (then nothing changed)."""
    fetcher = getattr(consumer, "_fetcher", None)
    base = getattr(fetcher, "PartitionRecords", None)
    if base is None or not callable(getattr(base, "_unpack_records", None)):
        return False

    try:
        params = list(inspect.signature(base.__init__).parameters)[:4]
    except (TypeError, ValueError):
        return False
    if params != ["self", "fetch_offset", "tp", "records"]:
        return False

    def copied(data: bytes, key_at: int, key_size: int, value_at: int, value_size: int, partition: int, offset: int,
               timestamp: int | None) -> TxnLogRecord | RequestError:
        return decode(data[key_at:key_at + key_size] if key_size >= 0 else None,
                      data[value_at:value_at + value_size] if value_size >= 0 else None, partition, offset, timestamp)

    in_place: DecodeIn = decode_in or copied

    class TxnLogPartitionRecords(base):  # type: ignore[misc,valid-type]  # kafka-python ships no types
        def __init__(self, fetch_offset: int, tp: Any, records: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(fetch_offset, tp, records, *args, **kwargs)
            data = getattr(records, "_buffer", None)
            # read_uncommitted only (the tail's): a read_committed consumer's aborted-transaction filter is
            # kafka-python's.  Anything else: kafka-python's records, decoded below.
            if getattr(self, "isolation_level", None) == 0 and isinstance(data, bytes) and (
                    PLAIN_V2 if walk is not None else plain_v2)(data):
                self.record_iterator = (
                    walked(self, tp.partition, data, in_place, problems, self.check_crcs, walk) if walk is not None
                    else self._batches(tp.partition, data))

        def _batches(self, partition: int, data: bytes) -> Iterator[TxnLogRecord]:
            yield from unpack(self, partition, data, in_place, problems, self.check_crcs)
            self.drain()

        def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any,
                            value_deserializer: Any) -> Iterator[TxnLogRecord]:
            partition = tp.partition
            for record in super()._unpack_records(tp, records, key_deserializer, value_deserializer):
                yield as_record(decode(record.key, record.value, partition, record.offset, record.timestamp),
                                partition, record.offset, record.timestamp, record.value, problems)

    fetcher.PartitionRecords = TxnLogPartitionRecords  # type: ignore[union-attr]  # checked above
    return True
