"""Lag in records: how many records a read_committed consumer still gets between its committed offset and the LSO.

Offset lag (LSO minus committed offset) counts offsets, and on transactional topics many
offsets are never delivered: every transaction ends on each partition with a commit/abort
marker that takes an offset, and an aborted transaction's records are filtered out by
read_committed consumers.  With one-record transactions half the offsets are markers; a
group one record and one marker behind shows an offset lag of 2 (issue 26, the "phantom
lag" of kafbat#1039, akhq#613, spring-kafka#1587 and librdkafka#2539).

So txnwatch reads the partition the way a read_committed consumer does: a Fetch at
``isolation_level=1`` from the committed offset (the broker stops at the LSO and names the
aborted transactions overlapping the range), then walks the batches as Kafka's consumer
does (``CompletedFetch``: an aborted transaction's producer is skipped from its first offset
until its ABORT marker; control batches are never delivered).  Whole batches count their
``recordCount`` from the header (exact on compacted topics too) without decompressing
anything; only a batch the committed offset falls inside is decompressed, within the
time-lag read's budget (:mod:`txnwatch.kafka.decompress`), to read its records' offset
deltas.

Bounded and incremental: one Fetch per leader per poll, :data:`PARTITION_MAX_BYTES` per
partition, at most ``limit`` partitions per poll.  What a read counted is kept per
(partition, committed offset) with the offset it reached; the next poll continues from
there (records below an LSO never change delivery: a transaction with records below it had
ended when the LSO passed them).  So a backlog larger than one read is counted over several
polls, the figure is absent until the count reaches the LSO, and a group that does not
move costs nothing once counted.
"""

from __future__ import annotations

import struct
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.record.util import decode_varint

from txnwatch.core.model import GroupSnapshot, PartitionSnapshot, RequestError, TopicPartition
from txnwatch.kafka import decompress, errors, records
from txnwatch.kafka.batches import Call
from txnwatch.kafka.records import RECORD_BUDGET_BYTES

_READ_COMMITTED = 1
#: One producer batch fits (max.message.bytes defaults to 1 MiB + 12); a larger backlog takes several polls.
PARTITION_MAX_BYTES = 1024 * 1024 + 64
_CACHE_SIZE = 50_000

Key = tuple[TopicPartition, int]  # (partition, committed offset)

_BATCH_HEAD = struct.Struct(">qiibIhiqqqhii")  # DefaultRecordBatch's header, as in kafka.records
_LOG_OVERHEAD = 12
_MAGIC_AT = 16
_CODEC_MASK, _TRANSACTIONAL, _CONTROL = 0x07, 0x10, 0x20
_ABORT = 0  # ControlRecordType.ABORT (COMMIT is 1)


class Uncountable(ValueError):
    """A batch the count must read cannot be read (damaged, past the budget, or of message format 0/1)."""


@dataclass(frozen=True, slots=True)
class Counted:
    """Records a read_committed consumer gets from the committed offset up to ``through`` (exclusive);
    ``problem`` set when the count cannot go on (the record lag stays unknown for this committed offset)."""

    records: int
    through: int
    problem: str | None = None


def wanted(partitions: Mapping[TopicPartition, PartitionSnapshot], groups: Iterable[GroupSnapshot]) -> list[Key]:
    """(partition, committed offset) of every group partition with offsets before the LSO, most first."""
    lags: dict[Key, int] = {}
    for group in groups:
        for tp, committed in group.offsets.items():
            partition = partitions.get(tp)
            if partition is None or partition.last_stable_offset is None or committed is None or committed < 0:
                continue
            if partition.log_start_offset is not None and committed < partition.log_start_offset:
                continue  # deleted by retention: the consumer would be reset, there is nothing to count
            if partition.last_stable_offset > committed:
                lags[(tp, committed)] = partition.last_stable_offset - committed
    return sorted(lags, key=lambda key: (-lags[key], key))


class RecordCounts:
    """Counts kept across polls, per (partition, committed offset); owned by one ClusterConnection."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._known: OrderedDict[Key, Counted] = OrderedDict()
        self.fetched = 0  # partitions fetched in total, for tests and benchmarks

    def plan(self, keys: Sequence[Key], lsos: Mapping[TopicPartition, int]) -> tuple[dict[Key, int], dict[Key, int]]:
        """(answers: key -> records up to this poll's LSO, reads: key -> offset to fetch from), reads bounded."""
        answers: dict[Key, int] = {}
        reads: dict[Key, int] = {}
        for key in keys:
            lso = lsos[key[0]]
            counted = self._known.get(key)
            if counted is not None and counted.through > lso:
                counted = None  # the LSO went back (log truncation): count again
                del self._known[key]
            if counted is not None and counted.problem is not None:
                continue
            if counted is not None and counted.through == lso:
                answers[key] = counted.records
                self._known.move_to_end(key)
            elif len(reads) < self.limit:
                reads[key] = key[1] if counted is None else counted.through
        return answers, reads

    def add(self, key: Key, more: Counted) -> Counted:
        """Adds a read that started where the kept count ended (or at the committed offset)."""
        before = self._known.get(key)
        total = more if before is None else Counted(before.records + more.records, more.through, more.problem)
        self.fetched += 1
        self._known[key] = total
        self._known.move_to_end(key)
        while len(self._known) > _CACHE_SIZE:
            self._known.popitem(last=False)
        return total


def fetch_calls(reads: Mapping[Key, int], leaders: Mapping[TopicPartition, int | None]) -> list[Call]:
    """One read_committed Fetch per leader (and per round: two groups on one partition need two requests)."""
    return records.fetch_calls([(tp, offset) for (tp, _), offset in reads.items()], leaders,
                               isolation_level=_READ_COMMITTED, partition_max_bytes=PARTITION_MAX_BYTES,
                               variant="count-")


def parse_fetch(response: Any, lsos: Mapping[TopicPartition, int], committed: Mapping[TopicPartition, int],
                ) -> tuple[dict[TopicPartition, Counted], list[RequestError]]:
    """Per fetched partition, what one answer adds: records from its fetch offset (none below ``committed``) up
    to this poll's LSO; partitions that errored or returned no whole batch are left out."""
    found: dict[TopicPartition, Counted] = {}
    problems: list[RequestError] = []
    for topic_data in response.responses:
        for data in topic_data.partitions:
            tp = TopicPartition(topic_data.topic, data.partition_index)
            if tp not in lsos or tp not in committed:
                continue
            if data.error_code != 0:
                problems.append(errors.from_code("Fetch", str(tp), data.error_code))
                continue
            aborted = [(a.producer_id, a.first_offset) for a in data.aborted_transactions or ()]
            try:
                counted = count_records(bytes(data.records or b""), committed[tp], lsos[tp], aborted)
            except Uncountable as exc:
                problems.append(errors.corrupt("Fetch", str(tp), f"{exc}; its record lag is unknown"))
                counted = Counted(0, 0, str(exc))
            if counted is not None:
                found[tp] = counted
    return found, problems


def count_records(raw: bytes, committed: int, lso: int, aborted: Sequence[tuple[int, int]],
                  budget: int = RECORD_BUDGET_BYTES) -> Counted | None:
    """Data records a read_committed consumer delivers at offsets in [committed, lso) among the whole batches of
    ``raw``, and the offset the count reaches; None when no whole batch below the LSO was returned.

    ``aborted``: the (producer id, first offset) pairs of the Fetch answer.  Raises :class:`Uncountable`.
    """
    pending = sorted(aborted, key=lambda a: a[1])
    aborting: set[int] = set()
    records, through, start = 0, None, 0
    view = memoryview(raw)
    while start + _LOG_OVERHEAD + 5 <= len(raw):
        base_offset, length = struct.unpack_from(">qi", raw, start)
        end = start + _LOG_OVERHEAD + length
        if end > len(raw) or base_offset >= lso:
            break  # cut short by the fetch size, or past this poll's LSO (it moved since)
        if raw[start + _MAGIC_AT] < 2:
            raise Uncountable(f"record batch at offset {base_offset} is of message format 0/1")
        if end < start + _BATCH_HEAD.size:
            raise Uncountable(f"record batch at offset {base_offset} is shorter than its header")
        (_, _, _, _, _, attributes, last_delta, _, _, producer_id, _, _, count) = _BATCH_HEAD.unpack_from(raw, start)
        batch, start = view[start:end], end
        last_offset = base_offset + last_delta
        through = last_offset + 1
        if producer_id >= 0:  # CompletedFetch: aborted transactions begun by now, for this batch's producer
            while pending and pending[0][1] <= last_offset:
                aborting.add(pending.pop(0)[0])
        if attributes & _CONTROL:
            if producer_id in aborting and _control_type(batch, base_offset) == _ABORT:
                aborting.discard(producer_id)
            continue
        if attributes & _TRANSACTIONAL and producer_id in aborting:
            continue
        if last_offset < committed:
            continue
        records += count if base_offset >= committed else _records_from(batch, attributes, base_offset, count,
                                                                         committed, budget)
    # No whole batch: the answer was cut short (or the response's byte budget went to other partitions).
    return None if through is None else Counted(records, min(through, lso))


def _control_type(batch: memoryview, base_offset: int) -> int:
    """The type of a control batch's one record (key: int16 version, int16 type)."""
    data = bytes(batch[_BATCH_HEAD.size:])
    try:
        _, pos = decode_varint(data, 0)  # record length
        _, pos = decode_varint(data, pos + 1)  # timestamp delta, after the attributes byte
        _, pos = decode_varint(data, pos)  # offset delta
        key_length, pos = decode_varint(data, pos)
        _, kind = struct.unpack_from(">hh", data, pos)
    except (IndexError, ValueError, struct.error) as exc:
        raise Uncountable(f"control record at offset {base_offset} cannot be read: {exc}") from exc
    if key_length < 4:
        raise Uncountable(f"control record at offset {base_offset} has a {key_length}-byte key")
    return int(kind)


def _records_from(batch: memoryview, attributes: int, base_offset: int, count: int, committed: int,
                  budget: int) -> int:
    """Records of the batch at offsets >= ``committed``: the one batch a count decompresses (within ``budget``)."""
    codec = attributes & _CODEC_MASK
    try:
        records = decompress.prefix(codec, batch[_BATCH_HEAD.size:], budget)
    except ValueError as exc:
        raise Uncountable(f"record batch at offset {base_offset}: {exc}") from exc
    data, pos = records.data, 0
    for index in range(count):
        try:
            size, body = decode_varint(data, pos)
            _, at = decode_varint(data, body + 1)  # timestamp delta, after the attributes byte
            offset_delta, _ = decode_varint(data, at)
        except (IndexError, ValueError):
            raise Uncountable(f"record batch at offset {base_offset}: the record at index {index} lies past the "
                              f"first {budget // (1024 * 1024)} MiB it decompresses to, or the batch ends early"
                              ) from None
        if base_offset + offset_delta >= committed:
            return count - index
        pos = body + size
    return 0
