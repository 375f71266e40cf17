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
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.consumer import FetchRequest
from kafka.record.memory_records import MemoryRecords

from txnwatch.core.model import GroupSnapshot, PartitionSnapshot, RequestError, TopicPartition
from txnwatch.kafka import errors
from txnwatch.kafka.batches import Call, by_node

#: Fetch v12 is the last that names topics (v13+ uses topic ids).
_FETCH_VERSION = 12
#: Enough for the first batch of most partitions; a larger first batch leaves the partition undated this poll
#: (the broker returns it whole only for the first partition of a response, KIP-74).
PARTITION_MAX_BYTES = 64 * 1024
RESPONSE_MAX_BYTES = 8 * 1024 * 1024
DEFAULT_LIMIT = 200
_CACHE_SIZE = 50_000

Key = tuple[TopicPartition, int]  # (partition, committed offset)


@dataclass(frozen=True, slots=True)
class Dated:
    """What one fetch learned: the first data record's timestamp, or None below ``high_watermark``."""

    timestamp_ms: int | None
    high_watermark: int


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

    def known(self, wanted: Sequence[Key], partitions: Mapping[TopicPartition, PartitionSnapshot]) -> dict[Key, int | None]:
        """Cached answers still valid for this poll's high watermarks."""
        answers: dict[Key, int | None] = {}
        for key in wanted:
            dated = self._known.get(key)
            if dated is None:
                continue
            hwm = partitions[key[0]].high_watermark
            if dated.timestamp_ms is not None or dated.high_watermark == hwm:
                answers[key] = dated.timestamp_ms
                self._known.move_to_end(key)
        return answers

    def to_fetch(self, wanted: Sequence[Key], answered: Mapping[Key, int | None]) -> list[Key]:
        return [key for key in wanted if key not in answered][: self.limit]

    def remember(self, found: Mapping[Key, Dated]) -> None:
        self.fetched += len(found)
        for key, dated in found.items():
            self._known[key] = dated
            self._known.move_to_end(key)
        while len(self._known) > _CACHE_SIZE:
            self._known.popitem(last=False)


def fetch_calls(keys: Sequence[Key], leaders: Mapping[TopicPartition, int | None]) -> list[Call]:
    """One Fetch per leader for the first record at each committed offset (one offset per partition and call)."""
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
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=RESPONSE_MAX_BYTES, isolation_level=0,
                session_id=0, session_epoch=-1,
                topics=[topic(topic=name, partitions=[partition(
                    partition=p, current_leader_epoch=-1, fetch_offset=offsets[TopicPartition(name, p)],
                    last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=PARTITION_MAX_BYTES)
                    for p in parts]) for name, parts in topics.items()],
                forgotten_topics_data=[], rack_id="", max_version=_FETCH_VERSION)
            calls.append(Call("Fetch", node, request, str(index)))
    return calls


def parse_fetch(response: Any, offsets: Mapping[TopicPartition, int]) -> tuple[dict[Key, Dated], list[RequestError]]:
    """First data record at or after each fetch offset; partitions that errored or were cut short are left out."""
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
                dated = _first_data_record(MemoryRecords(bytes(data.records)), offset, data.high_watermark)
            except Exception as exc:  # a record batch kafka-python cannot read costs this partition's date only
                problems.append(errors.corrupt("Fetch", str(tp), f"{type(exc).__name__}: {exc}"))
                continue
            if dated is not None:
                found[(tp, offset)] = dated
    return found, problems


def _first_data_record(records: MemoryRecords, offset: int, high_watermark: int) -> Dated | None:
    next_offset = offset
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        next_offset = max(next_offset, batch.next_offset)
        if getattr(batch, "is_control_batch", False):
            continue
        for record in batch:
            if record.offset >= offset:
                return Dated(int(record.timestamp), high_watermark)
    # Only control markers (or nothing) were returned: that answers "no data record" only up to the high watermark.
    return Dated(None, high_watermark) if next_offset >= high_watermark else None
