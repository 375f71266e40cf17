"""Every coordinator state transition, read from ``__transaction_state`` itself.

Polling samples the coordinators; the transaction log is what they write on every
transition (Ongoing, each partition added, PrepareCommit, CompleteCommit, epoch
bumps, producer id rotation).  Tailing it gives exact transition times, and under
transaction version 2 (KIP-890 part 2, Kafka 4 defaults) it is the only way to see
each commit: a poll almost always lands on Ongoing.  Reading the topic needs
Describe and Read on it where ACLs are enforced; without them the daemon falls back
to polling and says so.

Record format, as Kafka's ``TransactionLogKey.json`` (v0) and
``TransactionLogValue.json`` (v0, v1 flexible) define it: the key is ``int16 version,
string transactional id``; the value is ``int16 version, int64 ProducerId, int16
ProducerEpoch, int32 TransactionTimeoutMs, int8 TransactionStatus, nullable
[]{Topic, []int32 PartitionIds} TransactionPartitions, int64
TransactionLastUpdateTimestampMs, int64 TransactionStartTimestampMs`` plus, from v1,
tagged fields 0 PreviousProducerId, 1 NextProducerId (int64), 2
ClientTransactionVersion and, from Kafka 4.3, 3 NextProducerEpoch (int16): the table
:data:`VALUE_TAGS`.  A null value is the tombstone of an expired id.
KIP-915 asks future versions to only add tagged fields, so a value of a version we
do not know is read with the v1 layout and flagged; if that fails it is reported as
undecodable with its raw bytes.  Nothing here raises on bad bytes: one record
never stops the tail or costs the rest of its batch.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from txnwatch.core.extras import say_uncompiled
from txnwatch.core.model import TRANSACTION_STATE_TOPIC, RequestError, TxnLogKind, TxnLogRecord
from txnwatch.core.vocabulary import STATE_BY_ID, TxnState
from txnwatch.kafka import errors, txnlog_batches
from txnwatch.kafka.bounded import RefusalLog, bounded_client
from txnwatch.kafka.settings import ClusterConnectionSettings

API = "TransactionLog"
log = logging.getLogger(__name__)

# TransactionState ids as the coordinator persists them (TransactionState.java).
_STATES = STATE_BY_ID
_STATE_COUNT = len(_STATES)
_new_tuple = tuple.__new__
_KNOWN_VALUE_VERSIONS = (0, 1)

_HEAD = struct.Struct(">hqhib")  # version, producer id, epoch, timeout, status: 17 bytes
_I16 = struct.Struct(">h")
_KEY_HEAD = struct.Struct(">hh")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_TIMES = struct.Struct(">qq")
_DECODE_ERRORS = (ValueError, struct.error, IndexError, UnicodeDecodeError)


@dataclass(frozen=True, slots=True)
class ValueTag:
    """One tagged field of ``TransactionLogValue`` txnwatch reads: the :class:`TxnLogRecord` field it fills, its
    layout, and the field's value when Kafka did not write the tag (or wrote a negative "not set")."""

    field: str
    layout: struct.Struct
    unset: int | None = None


#: ``TransactionLogValue``'s tagged fields (flexible v1+) by tag, as Kafka's TransactionLogValue.json defines them.
#: Kafka <= 4.2 writes only ClientTransactionVersion: the producer ids never (KAFKA-20310), so detection works from
#: the sequence of records when they are absent.  4.3 adds NextProducerEpoch (tag 3).  Any other tag is kept raw
#: (``TxnLogRecord.unknown_tags``); one that lands (a lastProducerEpoch, apache/kafka#22096) is a line here and a
#: field of ``TxnLogRecord``.  A tag whose size is not its layout's is kept raw too.
VALUE_TAGS: Mapping[int, ValueTag] = {
    0: ValueTag("previous_producer_id", _I64),
    1: ValueTag("next_producer_id", _I64),
    2: ValueTag("client_transaction_version", _I16, unset=0),
    3: ValueTag("next_producer_epoch", _I16),
}
# Where each known tag's value goes in the record's tuple, and its layout: bound once, read per tag.
_TAG_SLOTS = {tag: (TxnLogRecord._fields.index(t.field), t.layout.size, t.layout.unpack_from, t.unset)
              for tag, t in VALUE_TAGS.items()}
_UNKNOWN_TAGS_SLOT = TxnLogRecord._fields.index("unknown_tags")


#: kafka-python's fetch settings for the tail; ``benchmarks/txnlog.py``'s client floor reads with the same ones.
#: ``fetch_min_bytes``: a broker answers a fetch once this much is there or ``FETCH_MAX_WAIT_MS`` passed.  With
#: kafka-python's default of 1 byte, every record of a producer trickling transactions came back in its own
#: fetch round-trip (a few records each, the whole fetch session's partitions parsed every time): on the issue
#: 25 lab (three producers) the tail's I/O thread spent 1.8 CPU-s a minute, the tail 1.0.  A log being read
#: back (catching up) fills 64 KiB at once, so throughput is unchanged; a trickle waits at most the max wait.
FETCH_CONFIG: Mapping[str, int] = {"max_poll_records": 10_000, "fetch_max_bytes": 16 * 1024 * 1024,
                                   "max_partition_fetch_bytes": 4 * 1024 * 1024, "fetch_min_bytes": 64 * 1024}
#: The longest a broker holds a fetch that has less than ``fetch_min_bytes``: what a trickle of records waits
#: (``transaction_log.fetch_wait_ms``).  A quiet log costs per fetch round, not per record: kafka-python sends one
#: fetch to every broker leading a partition of the log at once and they all answer when the wait ends, each
#: round ~1.3 ms of the tail's Kafka I/O thread per broker plus the tail's wake-up and, when records came, a commit.
#: On a 3-broker lab with the steady workload (a few dozen records a second) 2 s rather than 1 s took the tail's
#: three threads from 0.60 to 0.33 CPU-s a minute, side by side (issue 25); 500 ms (kafka-python's default) would
#: double the 1 s figure.  A trickle reaches the store up to ~2.5 s late (the wait, then the commit), which
#: the transaction timeouts it judges (tens of seconds and more) and a 15 s poll do not notice.  A busy log fills
#: ``fetch_min_bytes`` long before (30,000 records/s: within ~15 ms), so catching up and trailing are unchanged.
FETCH_MAX_WAIT_MS = 2_000
#: The wait while the log keeps filling whole polls (``max_poll_records``): see :class:`FetchWait`.
BUSY_FETCH_WAIT_MS = 100


@dataclass
class FetchWait:
    """The fetch wait as the log's pace asks: ``quiet_ms`` while reads come back short, ``BUSY_FETCH_WAIT_MS`` from
    a read that filled the poll until the next that does not.

    Why: kafka-python sends the next fetch while a partition's fetched records are still being handed out, and
    leaves that partition out of it.  When every other partition is caught up the broker then holds that fetch for
    the whole wait (it has nothing to send), and the busy partition's next fetch goes only after it comes back (one
    fetch in flight per broker).  With the 2 s a trickle wants, a log whose records lie in one partition stalled
    1.5-2 s per fetch of it: 300,000 records read back in 3.8 s instead of 2.4 s, the last 16,000 waiting
    (benchmarks/txnlog.py, issue 25).  A full poll means more is buffered or coming, so the short wait costs a
    busy log at most a fetch round per 100 ms that an empty partition set answers; a trickle keeps the long wait.
    """

    quiet_ms: int
    full: int  # max_poll_records: a read that returns this many filled the poll
    set_wait: Callable[[int], None] | None
    busy: bool = False

    def after_read(self, records: int) -> None:
        """After a read of ``records`` records: the wait the next fetches ask for."""
        busy = records >= self.full
        if busy != self.busy and self.set_wait is not None:
            self.set_wait(min(BUSY_FETCH_WAIT_MS, self.quiet_ms) if busy else self.quiet_ms)
        self.busy = busy

    def opening(self) -> None:
        """A tail opens as if busy: it mostly resumes behind the log (a restart, a new leader); the first short
        read brings the quiet wait back."""
        self.after_read(self.full)


class TxnLogUnavailable(Exception):
    """The topic cannot be read: not visible (Describe denied, or not created yet) or Read denied."""


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    byte = data[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        byte = data[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos + 1
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _string(data: bytes, pos: int, flexible: bool) -> tuple[str, int]:
    if flexible:
        size, pos = _uvarint(data, pos)
        size -= 1
    else:
        size = _I16.unpack_from(data, pos)[0]
        pos += 2
    if size < 0:
        raise ValueError("null string")
    end = pos + size
    if end > len(data):
        raise ValueError("record ends early")
    return data[pos:end].decode("utf-8"), end


def _array_length(data: bytes, pos: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        size, pos = _uvarint(data, pos)
        return size - 1, pos
    return _I32.unpack_from(data, pos)[0], pos + 4


def _skip_tags(data: bytes, pos: int) -> int:
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        _, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        pos += size
    if pos > len(data):
        raise ValueError("record ends early")
    return pos


def decode_key(key: bytes) -> str:
    if len(key) < 4:
        raise ValueError("record ends early")
    version, size = _KEY_HEAD.unpack_from(key, 0)
    if version != 0:
        raise ValueError(f"not a transaction log key (key version {version})")
    if size < 0:
        raise ValueError("null string")
    if 4 + size != len(key):
        raise ValueError("record ends early" if 4 + size > len(key) else "trailing bytes after transaction log key")
    return key[4:].decode("utf-8")


def decode_value(tid: str, value: bytes, log_partition: int, offset: int, timestamp_ms: int | None,
                 flexible_guess: bool = False) -> TxnLogRecord:
    """The value's fields; raises on bytes that do not fit the layout (the caller reports them).

    Read in the layout's order: the fixed head, each topic's partitions (:func:`_topic_partitions`),
    the two times, then (flexible versions) the tagged fields (:func:`_value_tags`); nothing may
    follow them."""
    version, producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(value, 0)
    flexible = version >= 1
    if flexible and value[17] < 0x80:  # the usual one-byte compact length, inline
        count, pos = value[17] - 1, 18
    else:
        count, pos = _array_length(value, 17, flexible)
    partitions: list[tuple[str, int]] = []
    for _ in range(count):  # a null list (-1) is none
        pos = _topic_partitions(value, pos, flexible, partitions)
    last_update_ms, start_ms = _TIMES.unpack_from(value, pos)
    pos += 16
    known = 0 <= status < _STATE_COUNT
    problem = None
    if flexible_guess:
        problem = f"value version {version} is newer than this txnwatch knows; read with the version 1 layout"
    # Every field, in TxnLogRecord's order, as a plain list then tuple: this runs per record (a test reads the
    # fields back by name), and skipping the NamedTuple's own __new__ saves a Python call each time.  The tagged
    # fields start at their unset values (TxnLogRecord's defaults, the same as VALUE_TAGS' by a test) and
    # :func:`_value_tags` puts what the record carries in their slots.
    fields = [tid, log_partition, offset, timestamp_ms, TxnLogKind.VALUE,
              _STATES[status] if known else TxnState.UNKNOWN, None if known else status,
              producer_id, epoch, timeout_ms, tuple(partitions), last_update_ms,
              start_ms if start_ms >= 0 else None, None, None, 0, version, (), problem, None, None]
    if flexible:
        pos = _value_tags(value, pos, fields)
    if pos != len(value):
        raise ValueError("trailing bytes after transaction log value")
    return _new_tuple(TxnLogRecord, fields)


def _topic_partitions(value: bytes, pos: int, flexible: bool, into: list[tuple[str, int]]) -> int:
    """One topic's entry (name, partition ids, flexible versions' tagged fields) appended to ``into``."""
    if flexible and (size := value[pos]) < 0x80:  # the usual one-byte compact length, inline
        end = pos + size
        if end > len(value) or size == 0:
            raise ValueError("record ends early" if size else "null string")
        topic = value[pos + 1:end].decode("utf-8")
        pos = end
    else:
        topic, pos = _string(value, pos, flexible)
    if flexible and (size := value[pos]) < 0x80:
        ids, pos = size - 1, pos + 1
    else:
        ids, pos = _array_length(value, pos, flexible)
    if ids == 1:
        into.append((topic, _I32.unpack_from(value, pos)[0]))
        pos += 4
    elif ids > 0:
        end = pos + 4 * ids
        if end > len(value):
            raise ValueError("record ends early")
        into += [(topic, p) for p in struct.unpack_from(f">{ids}i", value, pos)]
        pos = end
    if flexible:
        pos = pos + 1 if value[pos] == 0 else _skip_tags(value, pos)
    return pos


def _value_tags(value: bytes, pos: int, fields: list[object]) -> int:
    """The value's tagged fields (v1+) into the record's ``fields``: each known one (VALUE_TAGS) in its slot, the
    others raw in ``unknown_tags``; returns where they end."""
    # Counts, tags and sizes are one-byte varints but for tags Kafka has not defined yet: read inline.
    count, pos = (value[pos], pos + 1) if value[pos] < 0x80 else _uvarint(value, pos)
    for _ in range(count):
        tag, pos = (value[pos], pos + 1) if value[pos] < 0x80 else _uvarint(value, pos)
        size, pos = (value[pos], pos + 1) if value[pos] < 0x80 else _uvarint(value, pos)
        end = pos + size
        if end > len(value):
            raise ValueError("record ends early")
        known = _TAG_SLOTS.get(tag)
        if known is not None and known[1] == size:
            slot, _, unpack, unset = known
            number = unpack(value, pos)[0]
            fields[slot] = number if number >= 0 else unset
        else:
            fields[_UNKNOWN_TAGS_SLOT] = (*fields[_UNKNOWN_TAGS_SLOT], (tag, value[pos:end]))  # type: ignore[misc]  # always a tuple
        pos = end
    return pos


def decode_record(key: bytes | None, value: bytes | None, log_partition: int, offset: int,
                  timestamp_ms: int | None) -> TxnLogRecord | RequestError:
    """A record whose key names an id always comes back as a record (undecodable if need be);
    only a record that names no id at all is a :class:`RequestError`."""
    ts = timestamp_ms if timestamp_ms is not None and timestamp_ms >= 0 else None
    try:
        if key is None:
            raise ValueError("record without key")
        tid = decode_key(key)
    except _DECODE_ERRORS as exc:
        return errors.corrupt(API, f"{TRANSACTION_STATE_TOPIC}-{log_partition}@{offset}", str(exc) or type(exc).__name__)
    if value is None:
        return TxnLogRecord(tid, log_partition, offset, ts, TxnLogKind.TOMBSTONE)
    try:
        version = _I16.unpack_from(value, 0)[0]
        if version < 0:
            raise ValueError(f"negative value version {version}")
        return decode_value(tid, value, log_partition, offset, ts, version not in _KNOWN_VALUE_VERSIONS)
    except _DECODE_ERRORS as exc:
        return TxnLogRecord(tid, log_partition, offset, ts, TxnLogKind.UNDECODABLE,
                            problem=str(exc) or type(exc).__name__, raw_value=bytes(value))


# decode_in's tagged fields: where each known tag goes in its list (client transaction version, previous and next
# producer id, next epoch); a tag added to VALUE_TAGS but not here is read by decode_value only.
_FAST_SLOT = {"client_transaction_version": 0, "previous_producer_id": 1, "next_producer_id": 2,
              "next_producer_epoch": 3}
_FAST_TAGS = {tag: (_FAST_SLOT[t.field], t.layout.size, t.layout.unpack_from, t.unset)
              for tag, t in VALUE_TAGS.items() if t.field in _FAST_SLOT}
_VALUE = TxnLogKind.VALUE


def decode_in(data: bytes, key_at: int, key_size: int, value_at: int, value_size: int, log_partition: int,
              offset: int, timestamp_ms: int | None) -> TxnLogRecord | RequestError:
    """:func:`decode_record` of the key and value that lie in ``data`` (a fetched record batch), without
    copying them out first: the same answer for every input.

    Everything Kafka 4 writes (key v0, value v1 with one-byte compact lengths and known tags) is read here
    in one pass over the batch's bytes, building the record's tuple once.  Anything else (a tombstone,
    value v0 or a newer version, a long name, an unknown tag or status, damaged bytes) goes to
    :func:`decode_record`, which is the reference: this path gives up rather than decide.  Issue 25: the
    per-record calls and copies of the general decoder were a third of the tail's CPU."""
    try:
        value_end = value_at + value_size
        if (key_size < 4 or value_size < 18 or data[key_at] or data[key_at + 1] or data[key_at + 2] >= 0x80
                or (data[key_at + 2] << 8 | data[key_at + 3]) != key_size - 4):
            raise ValueError
        version, producer_id, epoch, timeout_ms, status = _HEAD.unpack_from(data, value_at)
        count = data[value_at + 17]
        if version != 1 or not 0 <= status < _STATE_COUNT or count >= 0x80:
            raise ValueError
        tid = data[key_at + 4:key_at + key_size].decode("utf-8")
        pos = value_at + 18
        partitions: tuple[tuple[str, int], ...] = ()
        if count > 1:  # count - 1 topics (0: a null list, 1: an empty one)
            found: list[tuple[str, int]] = []
            for _ in range(count - 1):
                size = data[pos]
                if size == 0 or size >= 0x80:
                    raise ValueError
                topic = data[pos + 1:pos + size].decode("utf-8")
                pos += size
                ids = data[pos] - 1
                if ids == 1:
                    found.append((topic, _I32.unpack_from(data, pos + 1)[0]))
                elif 0 <= ids < 0x7F:
                    found += [(topic, p) for p in struct.unpack_from(f">{ids}i", data, pos + 1)]
                else:
                    raise ValueError
                pos += 1 + 4 * ids
                if data[pos]:  # the topic's own tagged fields: none in any Kafka so far
                    raise ValueError
                pos += 1
            partitions = tuple(found)
        last_update_ms, start_ms = _TIMES.unpack_from(data, pos)
        pos += 16
        tags = data[pos]
        if tags >= 0x80:
            raise ValueError
        pos += 1
        tagged = [0, None, None, None]  # client transaction version, previous/next producer id, next epoch
        for _ in range(tags):
            known = _FAST_TAGS.get(data[pos])
            size = data[pos + 1]
            if known is None or known[1] != size:
                raise ValueError
            number = known[2](data, pos + 2)[0]
            tagged[known[0]] = number if number >= 0 else known[3]
            pos += 2 + size
        if pos != value_end:
            raise ValueError
    except _DECODE_ERRORS:
        return decode_record(data[key_at:key_at + key_size] if key_size >= 0 else None,
                             data[value_at:value_at + value_size] if value_size >= 0 else None,
                             log_partition, offset, timestamp_ms)
    ctv, previous_pid, next_pid, next_epoch = tagged
    return _new_tuple(TxnLogRecord, (
        tid, log_partition, offset, timestamp_ms if timestamp_ms is not None and timestamp_ms >= 0 else None, _VALUE,
        _STATES[status], None, producer_id, epoch, timeout_ms, partitions, last_update_ms,
        start_ms if start_ms >= 0 else None, previous_pid, next_pid, ctv, 1, (), None, None, next_epoch))


class TransactionLogTail:
    """Follows every partition of ``__transaction_state`` from stored positions onwards.

    ``positions`` maps log partition -> next offset to read, as a previous tail reported
    them; partitions without one start at the beginning (``from_beginning``) or the end.
    :meth:`positions` after a :meth:`read` are exactly past the records it returned, so
    storing them with what was derived from those records never skips or repeats one.
    Not thread-safe: one tail belongs to one reader thread.
    """

    def __init__(self, settings: ClusterConnectionSettings, *, positions: Mapping[int, int] | None = None,
                 from_beginning: bool = True, topic: str = TRANSACTION_STATE_TOPIC,
                 max_poll_records: int = FETCH_CONFIG["max_poll_records"],
                 fetch_wait_ms: int = FETCH_MAX_WAIT_MS) -> None:
        config = settings.client_config()
        self.topic = topic
        self.refusals = RefusalLog()
        # At most half the request timeout: a held fetch must come back well before kafka-python gives up on it.
        wait_ms = min(fetch_wait_ms, max(settings.request_timeout_ms, 1_000) // 2)
        self._consumer = KafkaConsumer(
            bootstrap_servers=config["bootstrap_servers"], client_id=f"{settings.client_id}-txnlog",
            group_id=None, enable_auto_commit=False, auto_offset_reset="earliest",
            **{**FETCH_CONFIG, "max_poll_records": max_poll_records},
            request_timeout_ms=max(settings.request_timeout_ms, 1_000),
            # The cluster's connect timeout, as the poll loop's own bootstrap uses (kafka-python's default is 30 s,
            # and a daemon stopping while its tail bootstraps against an unreachable cluster waited that long).
            bootstrap_timeout_ms=settings.connect_timeout_ms,
            fetch_max_wait_ms=wait_ms,
            # Nothing reads the tail consumer's own metrics (txnwatch's are its HistoryView): kafka-python's
            # sensors recorded every request, response and fetch on the I/O thread, ~3 fetch rounds a second
            # on a quiet 3-broker cluster (issue 25).
            metrics_enabled=False,
            # Its connections read under the cluster's bounds too (frame size, entries: kafka/bounded.py).
            kafka_client=bounded_client(settings.response_bounds, self.refusals),
            receive_message_max_bytes=settings.max_response_bytes,
            **{k: v for k, v in config.items() if k.startswith(("security_", "sasl_", "ssl_"))})
        try:
            partitions = self._consumer.partitions_for_topic(topic) or set()
            if not partitions:
                raise TxnLogUnavailable(
                    f"topic {topic} is not visible: it does not exist yet (no transactional producer has run) "
                    "or this principal lacks Describe on it")
            self._partitions = [KafkaTopicPartition(topic, p) for p in sorted(partitions)]
            self._wait = FetchWait(wait_ms, max_poll_records, txnlog_batches.fetch_wait_control(self._consumer))
            self._wait.opening()
            self._consumer.assign(self._partitions)
            stored = dict(positions or {})
            for tp in self._partitions:
                if tp.partition in stored:
                    self._consumer.seek(tp, stored[tp.partition])
                elif from_beginning:
                    self._consumer.seek_to_beginning(tp)
                else:
                    self._consumer.seek_to_end(tp)
            # kafka-python's fetch, its records decoded from the batch bytes (kafka/txnlog_batches.py), compiled
            # where txnwatch was built with its C walk: the records it would otherwise build were most of the
            # tail's CPU.
            self._problems: list[RequestError] = []
            self._batches = txnlog_batches.install(self._consumer, decode_record, self._problems, decode_in,
                                                   walk=txnlog_batches.WALK)
            if txnlog_batches.WALK is None:
                say_uncompiled(log, "the compiled walk", f"reading {topic} with the Python batch walk",
                               "about 1.3x the CPU per record", txnlog_batches.WALK_MISSING)
            # Resolve now: a lazy seek would skip what is written before the first read.
            self._next = {tp.partition: self._consumer.position(tp) for tp in self._partitions}
        except Exception:
            self._consumer.close()
            raise

    @property
    def partitions(self) -> int:
        return len(self._partitions)

    def positions(self) -> dict[int, int]:
        """Next offset to read per log partition, just past the records returned so far."""
        return dict(self._next)

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
        """What the coordinators wrote since the last read, in log order per coordinator partition.

        Every record comes back, an unreadable one as UNDECODABLE; ``problems`` repeats the
        ones that named no transactional id, for the log."""
        records: list[TxnLogRecord] = []
        for tp, batch in sorted(self._consumer.poll(timeout_ms).items(), key=lambda kv: kv[0].partition):
            if not batch:
                continue
            partition = tp.partition
            if self._batches:  # decoded already, problems noted as they were met
                records += batch
            else:
                for record in batch:
                    records.append(txnlog_batches.as_record(
                        decode_record(record.key, record.value, partition, record.offset, record.timestamp),
                        partition, record.offset, record.timestamp, record.value, self._problems))
            self._next[partition] = batch[-1].offset + 1
        self._wait.after_read(len(records))
        problems, self._problems[:] = self._problems[:], []
        return records, problems

    def end_offsets(self) -> dict[int, int]:
        """The log end per partition: how far the coordinators have written (for the lag figure)."""
        ends = self._consumer.end_offsets(self._partitions)
        return {tp.partition: offset for tp, offset in ends.items()}

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> TransactionLogTail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def denied_reason(exc: BaseException) -> str | None:
    """If ``exc`` means this principal may not read the log, the operator's explanation; else None."""
    import kafka.errors as Errors

    if isinstance(exc, TxnLogUnavailable):
        return str(exc)
    if isinstance(exc, Errors.TopicAuthorizationFailedError):
        return (f"reading {TRANSACTION_STATE_TOPIC} was denied (TOPIC_AUTHORIZATION_FAILED): grant this principal Describe and Read "
                f"on topic {TRANSACTION_STATE_TOPIC} for exact history")
    if isinstance(exc, (Errors.ClusterAuthorizationFailedError, Errors.GroupAuthorizationFailedError)):
        return f"authorization failed while reading {TRANSACTION_STATE_TOPIC} ({type(exc).__name__})"
    return None
