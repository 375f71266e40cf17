"""The timestamp of the first record a consumer group has not consumed, for time lag that needs no guessing.

Lag in seconds is ``now - timestamp(first unconsumed record)``.  Extrapolating from
offsets is wrong exactly when it matters: during an LSO stall the LSO's rate is what the
stall holds down.  So each poll fetches, for lagging group partitions, the first record
at the committed offset: one Fetch per partition leader, ``read_uncommitted`` (the record
at a stalled LSO is the open transaction's first one, which is the one a read_committed
group waits for), no waiting (``max_wait_ms=0``), a small byte budget per partition.

Bounded and cached: at most ``limit`` partitions per poll, most lagging first; a found
timestamp never changes (the log is append-only), so it is cached per (partition,
offset) until the group moves on; "nothing but control markers up to the high
watermark" is cached while the high watermark stays put.  In a steady state a poll
fetches only for groups that committed since the previous poll.

Bounded in memory: a tenant's record can be small on the wire and huge inside (200 MB of
zeros gzip to 204 KB, under the default ``max.message.bytes``; kafka-python's
``MemoryRecords`` would decompress it whole, issue 23).  Batches of message format v2 are
read here instead: the header as Kafka's ``DefaultRecordBatch`` lays it out, then only the
first :data:`RECORD_BUDGET_BYTES` of the decompressed records
(:mod:`txnwatch.kafka.decompress`), of which only each record's length, timestamp delta and
offset delta are read.  A record whose header lies past that budget, or a batch that
cannot be read at all, is *unreadable*: its time lag is unknown, with the reason, and the
answer is cached like a timestamp (the log does not change under an offset), so it is not
fetched again while the group stays there.  Older message formats (magic 0 and 1, gone in
Kafka 4) go through kafka-python, whose decompression the kafka layer bounds too.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecords
from kafka.record.util import calc_crc32c, decode_varint

from txnwatch.core.model import (
    GroupSnapshot,
    PartitionSnapshot,
    RequestError,
    TimeLagUnknown,
    TopicPartition,
    UnreadableRecord,
)
from txnwatch.kafka import decompress, errors
from txnwatch.kafka.batches import Call, by_node

#: Fetch v12 is the last that names topics (v13+ uses topic ids).
_FETCH_VERSION = 12
#: Enough for the first batch of most partitions; a larger first batch leaves the partition undated this poll
#: (the broker returns it whole only for the first partition of a response, KIP-74).
PARTITION_MAX_BYTES = 64 * 1024
RESPONSE_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_LIMIT = 200
#: Decompressed bytes of one batch read to reach the record at a committed offset.  Producers' batches are
#: ``batch.size`` (16 KiB by default) before compression; 8 MiB also covers batches of 1 MiB records.
RECORD_BUDGET_BYTES = 8 * 1024 * 1024
_FIRST_READ_BYTES = 64 * 1024
_CACHE_SIZE = 50_000

Key = tuple[TopicPartition, int]  # (partition, committed offset)


# DefaultRecordBatch: baseOffset int64, batchLength int32, partitionLeaderEpoch int32, magic int8, crc uint32,
# attributes int16, lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64, producerId int64,
# producerEpoch int16, baseSequence int32, recordCount int32.
_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")
_LOG_OVERHEAD = 12  # baseOffset + batchLength
_MAGIC_AT, _CRC_FROM = 16, 21
_CODEC_MASK, _LOG_APPEND_TIME, _CONTROL = 0x07, 0x08, 0x20


@dataclass(frozen=True, slots=True)
class Dated:
    """What one fetch learned: the first data record's timestamp, or None below ``high_watermark``;
    or, with ``unreadable``, why that record cannot be read (its time lag is unknown)."""

    timestamp_ms: int | None
    high_watermark: int
    unreadable: UnreadableRecord | None = None


class Unreadable(ValueError):
    """The record at the offset cannot be read within the budget, or its batch cannot be read at all."""

    def __init__(self, message: str, *, over_budget: bool = False) -> None:
        super().__init__(message)
        self.over_budget = over_budget


def lagging(partitions: Mapping[TopicPartition, PartitionSnapshot], groups: Iterable[GroupSnapshot]) -> list[Key]:
    """(partition, committed offset) of every group partition with records after its committed offset, most first.

    A committed offset below the log start (a long-stopped group) is left to the fallback estimate.
    """
    lags: dict[Key, int] = {}
    for group in groups:
        for tp, committed in group.offsets.items():
            partition = partitions.get(tp)
            if partition is None or partition.high_watermark is None or committed is None or committed < 0:
                continue
            if partition.log_start_offset is not None and committed < partition.log_start_offset:
                continue  # deleted by retention: the fetch would only answer OFFSET_OUT_OF_RANGE
            lag = partition.high_watermark - committed
            if lag > 0:
                lags[(tp, committed)] = lag
    return sorted(lags, key=lambda key: (-lags[key], key))


class RecordDates:
    """Cache of fetched first-record timestamps; owned by one ClusterConnection."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._known: OrderedDict[Key, Dated] = OrderedDict()
        self.fetched = 0  # partitions fetched in total, for tests and benchmarks

    def known(self, wanted: Sequence[Key], partitions: Mapping[TopicPartition, PartitionSnapshot]) -> dict[Key, Dated]:
        """Cached answers still valid for this poll's high watermarks (a timestamp or an unreadable record: always)."""
        answers: dict[Key, Dated] = {}
        for key in wanted:
            dated = self._known.get(key)
            if dated is None:
                continue
            hwm = partitions[key[0]].high_watermark
            if dated.timestamp_ms is not None or dated.unreadable is not None or dated.high_watermark == hwm:
                answers[key] = dated
                self._known.move_to_end(key)
        return answers

    def to_fetch(self, wanted: Sequence[Key], answered: Mapping[Key, Dated]) -> list[Key]:
        return [key for key in wanted if key not in answered][: self.limit]

    def remember(self, found: Mapping[Key, Dated]) -> None:
        self.fetched += len(found)
        for key, dated in found.items():
            self._known[key] = dated
            self._known.move_to_end(key)
        while len(self._known) > _CACHE_SIZE:
            self._known.popitem(last=False)


def fetch_calls(keys: Sequence[Key], leaders: Mapping[TopicPartition, int | None], *, isolation_level: int = 0,
                partition_max_bytes: int = PARTITION_MAX_BYTES, variant: str = "") -> list[Call]:
    """One Fetch per leader from each (partition, offset) (one offset per partition and call), no waiting.

    The time lag reads read_uncommitted, 64 KiB; the record count (kafka.record_count) read_committed, 1 MiB.
    """
    rounds: list[dict[TopicPartition, int]] = []
    for tp, offset in keys:  # two groups at different offsets of one partition need two requests
        for batch in rounds:
            if tp not in batch:
                batch[tp] = offset
                break
        else:
            rounds.append({tp: offset})
    topic, partition = FetchRequest.FetchTopic, FetchRequest.FetchTopic.FetchPartition
    calls = []
    for index, offsets in enumerate(rounds):
        led = {tp: leader for tp in offsets if (leader := leaders.get(tp)) is not None}
        for node, topics in by_node(led).items():
            request = FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=RESPONSE_MAX_BYTES, isolation_level=isolation_level,
                session_id=0, session_epoch=-1,
                topics=[topic(topic=name, partitions=[partition(
                    partition=p, current_leader_epoch=-1, fetch_offset=offsets[TopicPartition(name, p)],
                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                    for p in parts]) for name, parts in topics.items()],
                forgotten_topics_data=[], rack_id="", max_version=_FETCH_VERSION)
            calls.append(Call("Fetch", node, request, f"{variant}{index}"))
    return calls


def fetched_offsets(call: Call) -> dict[TopicPartition, int]:
    """The offset each partition of a Fetch call was read from."""
    return {TopicPartition(t.topic, p.partition): p.fetch_offset for t in call.request.topics for p in t.partitions}


def parse_fetch(response: Any, offsets: Mapping[TopicPartition, int],
                budget: int = RECORD_BUDGET_BYTES) -> tuple[dict[Key, Dated], list[RequestError]]:
    """First data record at or after each fetch offset; partitions that errored or were cut short are left out.

    A record that cannot be read (past ``budget``, or a damaged batch) is answered as unreadable and reported once
    as a problem: the caller caches the answer, so the same record is not fetched again.
    """
    found: dict[Key, Dated] = {}
    problems: list[RequestError] = []
    for topic_data in response.responses:
        for data in topic_data.partitions:
            tp = TopicPartition(topic_data.topic, data.partition_index)
            offset = offsets.get(tp)
            if offset is None:
                continue
            if data.error_code != 0:  # e.g. TOPIC_AUTHORIZATION_FAILED without Read: time lag falls back
                problems.append(errors.from_code("Fetch", str(tp), data.error_code))
                continue
            if not data.records:
                if data.high_watermark <= offset:
                    found[(tp, offset)] = Dated(None, data.high_watermark)
                continue
            try:
                dated = first_data_record(bytes(data.records), offset, data.high_watermark, budget)
            except Unreadable as exc:
                unreadable = UnreadableRecord(
                    TimeLagUnknown.RECORD_OVER_BUDGET if exc.over_budget else TimeLagUnknown.RECORD_UNREADABLE,
                    f"record {offset}: {exc}")
                problems.append(errors.corrupt("Fetch", str(tp), f"{unreadable}; its time lag is unknown"))
                found[(tp, offset)] = Dated(None, data.high_watermark, unreadable)
                continue
            if dated is not None:
                found[(tp, offset)] = dated
    return found, problems


def first_data_record(raw: bytes, offset: int, high_watermark: int, budget: int = RECORD_BUDGET_BYTES) -> Dated | None:
    """The first data record at or after ``offset`` in the batches of one Fetch answer, reading at most ``budget``
    decompressed bytes of any batch; None if the answer ends before it (a batch cut short by the fetch size).

    Raises :class:`Unreadable`.
    """
    start, next_offset = 0, offset
    view = memoryview(raw)
    while start + _LOG_OVERHEAD + 5 <= len(raw):
        base_offset, length = struct.unpack_from(">qi", raw, start)
        end = start + _LOG_OVERHEAD + length
        if end > len(raw):
            break  # the last batch of an answer may be partial (the fetch size cut it)
        if raw[start + _MAGIC_AT] < 2:
            return _legacy_first_record(raw[start:], offset, high_watermark)
        if end < start + _BATCH_HEAD.size:
            raise Unreadable(f"record batch at offset {base_offset} is shorter than its header")
        (_, _, _, _, crc, attributes, last_delta, first_ms, max_ms, _, _, _, count) = _BATCH_HEAD.unpack_from(raw, start)
        batch, start = view[start:end], end
        batch_end = base_offset + last_delta + 1
        next_offset = max(next_offset, batch_end)
        if attributes & _CONTROL or batch_end <= offset:
            continue
        if calc_crc32c(batch[_CRC_FROM:]) != crc:
            raise Unreadable(f"record batch at offset {base_offset} fails its CRC check")
        codec = attributes & _CODEC_MASK
        log_append_ms = max_ms if attributes & _LOG_APPEND_TIME else None
        try:
            # Most committed offsets sit near the start of their batch: read a little first, the budget if need be.
            for limit in sorted({min(_FIRST_READ_BYTES, budget), budget}):
                records = decompress.prefix(codec, batch[_BATCH_HEAD.size:], limit)
                try:
                    timestamp = _record_timestamp(records, offset, base_offset, count, log_append_ms, first_ms)
                    break
                except _PastBudget:
                    if limit == budget:
                        raise
        except Unreadable:
            raise
        except ValueError as exc:  # from the codec
            raise Unreadable(f"record batch at offset {base_offset}: {exc}") from exc
        except _PastBudget:
            raise Unreadable(f"it lies past the first {budget // (1024 * 1024)} MiB that its "
                             f"{decompress.CODEC_NAMES.get(codec, codec)} batch (offset {base_offset}, "
                             f"{len(batch):,} bytes) decompresses to, the budget for one batch",
                             over_budget=True) from None
        if timestamp is not None:
            return Dated(int(timestamp), high_watermark)
    # Only control markers (or nothing) were returned: that answers "no data record" only up to the high watermark.
    return Dated(None, high_watermark) if next_offset >= high_watermark else None


class _PastBudget(Exception):
    """The decompressed prefix ends before the record's header."""


def _record_timestamp(records: decompress.Prefix, offset: int, base_offset: int, count: int,
                      log_append_ms: int | None, first_ms: int) -> int | None:
    """The timestamp of the first record at or after ``offset``, None if the batch has none (compacted away);
    raises :class:`_PastBudget` if the decompressed prefix ends before that record's header."""
    data, pos = records.data, 0
    for _ in range(count):
        try:
            size, body = decode_varint(data, pos)
            timestamp_delta, at = decode_varint(data, body + 1)  # after the record's attributes byte
            offset_delta, _ = decode_varint(data, at)
        except IndexError:
            if records.complete:
                raise Unreadable(f"record batch at offset {base_offset} ends early") from None
            raise _PastBudget from None
        except ValueError as exc:
            raise Unreadable(f"record batch at offset {base_offset}: {exc}") from exc
        if base_offset + offset_delta >= offset:
            return log_append_ms if log_append_ms is not None else first_ms + timestamp_delta
        pos = body + size
        if pos > len(data):
            if records.complete:
                raise Unreadable(f"record batch at offset {base_offset} ends early")
            raise _PastBudget
    return None


def _legacy_first_record(raw: bytes, offset: int, high_watermark: int) -> Dated | None:
    """Message formats 0 and 1, through kafka-python (whose decompression the kafka layer bounds)."""
    records = MemoryRecords(raw)
    try:
        while records.has_next():
            batch = records.next_batch()
            if batch is None:
                break
            for record in batch:
                if record.offset >= offset:
                    return Dated(int(record.timestamp), high_watermark)
    except decompress.OverBudget as exc:
        raise Unreadable(str(exc), over_budget=True) from exc
    except Exception as exc:  # a message set kafka-python cannot read costs this partition's date only
        raise Unreadable(f"{type(exc).__name__}: {exc}") from exc
    return None
