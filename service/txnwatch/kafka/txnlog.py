"""Every coordinator state transition, read from ``__transaction_state`` itself.

Polling samples the coordinators; the transaction log is what they write on every
transition (Ongoing, each partition added, PrepareCommit, CompleteCommit, epoch
bumps, expiry).  Tailing it gives exact transition times and the moment each
partition joined a transaction, which is what KIP-890's verification metrics are
about.  Reading the topic needs Describe and Read on it where ACLs are enforced.

Record format (Kafka's TransactionLogKey v0 and TransactionLogValue v0/v1):
the key is ``int16 version, string transactional id``; the value is ``int16
version`` and the fields below, v1 being a flexible version (compact strings and
arrays, tagged fields).  A null value is the tombstone of an expired id.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from txnwatch.kafka import errors
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.model import RequestError, TopicPartition, TxnState

TOPIC = "__transaction_state"

# TransactionState ids as the coordinator persists them.
_STATES = (TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
           TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)
_TAG_PREVIOUS_PRODUCER_ID, _TAG_NEXT_PRODUCER_ID, _TAG_CLIENT_TRANSACTION_VERSION = 0, 1, 2


@dataclass(frozen=True, slots=True)
class TxnLogValue:
    """A transactional id's full coordinator state after one transition."""

    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    partitions: frozenset[TopicPartition]
    last_update_ms: int
    start_ms: int | None
    previous_producer_id: int | None = None
    next_producer_id: int | None = None
    client_transaction_version: int = 0


@dataclass(frozen=True, slots=True)
class TxnLogEntry:
    """One record of the transaction log; ``value`` is ``None`` when the id expired and was removed."""

    transactional_id: str
    value: TxnLogValue | None
    log_partition: int
    offset: int
    timestamp_ms: int | None


class _Reader:
    """Big-endian cursor over one record, in the classic or the flexible encoding."""

    def __init__(self, data: bytes, flexible: bool) -> None:
        self._data, self._pos, self.flexible = data, 0, flexible

    def _take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self._pos + size > len(self._data):
            raise ValueError("record ends early")
        (value,) = struct.unpack_from(fmt, self._data, self._pos)
        self._pos += size
        return value

    def int8(self) -> int:
        return int(self._take(">b"))

    def int16(self) -> int:
        return int(self._take(">h"))

    def int32(self) -> int:
        return int(self._take(">i"))

    def int64(self) -> int:
        return int(self._take(">q"))

    def varint(self) -> int:
        shift = result = 0
        while True:
            byte = int(self._take(">B"))
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise ValueError("varint too long")

    def length(self) -> int:
        """An array or string length; -1 is null."""
        return self.varint() - 1 if self.flexible else self.int32()

    def string(self) -> str:
        size = self.varint() - 1 if self.flexible else self.int16()
        if size < 0:
            raise ValueError("null string")
        raw = self._data[self._pos:self._pos + size]
        if len(raw) != size:
            raise ValueError("record ends early")
        self._pos += size
        return raw.decode("utf-8")

    def tagged_fields(self) -> dict[int, bytes]:
        if not self.flexible:
            return {}
        fields = {}
        for _ in range(self.varint()):
            tag, size = self.varint(), self.varint()
            fields[tag] = self._data[self._pos:self._pos + size]
            self._pos += size
        if self._pos > len(self._data):
            raise ValueError("record ends early")
        return fields

    def done(self) -> bool:
        return self._pos == len(self._data)


def decode_key(key: bytes) -> str:
    reader = _Reader(key, flexible=False)
    version = reader.int16()
    if version != 0:
        raise ValueError(f"not a transaction log key (version {version})")
    return reader.string()


def decode_value(value: bytes) -> TxnLogValue:
    version = _Reader(value, flexible=False).int16()
    if version not in (0, 1):
        raise ValueError(f"unknown transaction log value version {version}")
    reader = _Reader(value[2:], flexible=version >= 1)
    producer_id, epoch, timeout_ms, status = reader.int64(), reader.int16(), reader.int32(), reader.int8()
    if not 0 <= status < len(_STATES):
        raise ValueError(f"unknown transaction status {status}")
    partitions: set[TopicPartition] = set()
    for _ in range(max(reader.length(), 0)):
        topic = reader.string()
        partitions.update(TopicPartition(topic, reader.int32()) for _ in range(max(reader.length(), 0)))
        reader.tagged_fields()
    last_update_ms, start_ms = reader.int64(), reader.int64()
    tags = reader.tagged_fields()
    if not reader.done():
        raise ValueError("trailing bytes after transaction log value")

    def tagged(tag: int, fmt: str, default: int) -> int:
        return int(struct.unpack(fmt, tags[tag])[0]) if tag in tags else default

    previous = tagged(_TAG_PREVIOUS_PRODUCER_ID, ">q", -1)
    following = tagged(_TAG_NEXT_PRODUCER_ID, ">q", -1)
    return TxnLogValue(
        state=_STATES[status], producer_id=producer_id, producer_epoch=epoch, timeout_ms=timeout_ms,
        partitions=frozenset(partitions), last_update_ms=last_update_ms,
        start_ms=start_ms if start_ms >= 0 else None,
        previous_producer_id=previous if previous >= 0 else None,
        next_producer_id=following if following >= 0 else None,
        client_transaction_version=tagged(_TAG_CLIENT_TRANSACTION_VERSION, ">h", 0))


def decode_record(key: bytes | None, value: bytes | None, log_partition: int, offset: int,
                  timestamp_ms: int | None) -> TxnLogEntry | RequestError:
    """A garbled record is reported, never raised: one bad byte must not stop the tail."""
    target = f"{TOPIC}-{log_partition}@{offset}"
    try:
        if key is None:
            raise ValueError("record without key")
        transactional_id = decode_key(key)
        decoded = decode_value(value) if value is not None else None
    except (ValueError, struct.error, UnicodeDecodeError) as exc:
        return errors.corrupt("TransactionLog", target, str(exc))
    return TxnLogEntry(transactional_id, decoded, log_partition, offset,
                       timestamp_ms if timestamp_ms is not None and timestamp_ms >= 0 else None)


class TransactionLogTail:
    """Follows every partition of ``__transaction_state`` from its end (or start) onwards.

    Not thread-safe: one tail belongs to one reader, typically a collector job.
    """

    def __init__(self, settings: ClusterConnectionSettings, *, from_beginning: bool = False) -> None:
        config = settings.client_config()
        self._consumer = KafkaConsumer(
            bootstrap_servers=config["bootstrap_servers"], client_id=f"{settings.client_id}-txnlog",
            group_id=None, enable_auto_commit=False,
            request_timeout_ms=max(settings.request_timeout_ms, 1_000),
            fetch_max_wait_ms=min(500, max(settings.request_timeout_ms, 1_000) // 2),
            **{k: v for k, v in config.items() if k.startswith(("security_", "sasl_", "ssl_"))})
        partitions = self._consumer.partitions_for_topic(TOPIC) or set()
        self._partitions = [KafkaTopicPartition(TOPIC, p) for p in sorted(partitions)]
        self._consumer.assign(self._partitions)
        if from_beginning:
            self._consumer.seek_to_beginning()
        else:
            self._consumer.seek_to_end()
        for tp in self._partitions:  # resolve now: a lazy seek would skip what is written before the first read
            self._consumer.position(tp)

    @property
    def partitions(self) -> int:
        return len(self._partitions)

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogEntry], list[RequestError]]:
        """What the coordinators wrote since the last read, in log order per coordinator partition."""
        entries: list[TxnLogEntry] = []
        problems: list[RequestError] = []
        for tp, records in sorted(self._consumer.poll(timeout_ms).items(), key=lambda kv: kv[0].partition):
            for record in records:
                decoded = decode_record(record.key, record.value, tp.partition, record.offset, record.timestamp)
                if isinstance(decoded, TxnLogEntry):
                    entries.append(decoded)
                else:
                    problems.append(decoded)
        return entries, problems

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> TransactionLogTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
