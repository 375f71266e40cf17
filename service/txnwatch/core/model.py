"""Snapshot dataclasses: the one shape in which Kafka's answers travel through txnwatch.

`kafka/` builds these from wire answers, `detect/` reads them (pure functions), and
`store/`, `metrics`, `api/` and `alerting/` consume what detection derives.  They are
frozen so a published snapshot can be shared between the collector thread and API
requests without copying.

Sentinels from the wire (-1 for "no transaction", "no start time") become ``None``
here, so no consumer has to remember Kafka's conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

# Re-exported: detection names reasons through the model; the words themselves live in the vocabulary.
from txnwatch.core.vocabulary import HangingReason as HangingReason
from txnwatch.core.vocabulary import TxnState as TxnState

#: Kafka's internal topic of the transaction coordinators' state (the log the tail reads, the canary's blame).
TRANSACTION_STATE_TOPIC = "__transaction_state"


class TopicPartition(NamedTuple):
    """A partition by topic name and index; ordered by topic, then partition.

    A NamedTuple rather than a dataclass (issue 25): a poll hashes, compares and sorts tens of thousands of
    these (12,000 group partitions, 2,000 partitions three offsets each), and a tuple does that in C, 5-6x
    faster than a dataclass's generated ``__hash__``/``__eq__``/``__lt__``.  The hash is the same value
    (the hash of ``(topic, partition)``), so set and dict orders do not change; ``str()`` is as before."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def split_topic_partition(text: str) -> tuple[str, int]:
    """The inverse of ``str(TopicPartition)`` for stored values: a topic may itself hold dashes, so the partition
    is what follows the last one. Text without a numeric partition keeps its whole self as the topic and
    partition -1: shown as read, never dropped, never an exception in the reader."""
    topic, _, partition = text.rpartition("-")
    return (topic, int(partition)) if partition.isdigit() and topic else (text, -1)


class ErrorClass(StrEnum):
    """KIP-1050 error classes, plus the cases KIP-1050 does not cover."""

    RETRIABLE = "retriable"
    REFRESH_RETRIABLE = "refresh-retriable"
    ABORTABLE = "abortable"
    APPLICATION_RECOVERABLE = "application-recoverable"
    INVALID_CONFIGURATION = "invalid-configuration"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class RequestError:
    """One failed request or per-object error inside an answer, kept instead of raised.

    ``target`` names what was asked: a broker id, a topic-partition, a transactional id
    or a group id.  A poll carries on past these; detection treats whatever they cover
    as *unknown*, never as evidence.
    """

    api: str
    target: str
    code: int | None
    name: str
    message: str = ""
    error_class: ErrorClass = ErrorClass.UNKNOWN
    #: What to do about it (KIP-1050's remediation for the class), set by the Kafka layer with the class.
    advice: str = ""


class ClusterUnreachable(Exception):
    """No broker of the cluster answered (raised by the Kafka layer); the collector reports the cluster as down."""

    # Also readable without the type: a probe that succeeds later means the cluster is back.
    cluster_unreachable = True

    def __init__(self, cluster: str, reason: str) -> None:
        super().__init__(f"cluster {cluster!r} unreachable: {reason}")
        self.cluster = cluster
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Refusal:
    """An answer a broker sent that txnwatch refused to read (issue 38): its frame promised more bytes than
    ``max_response_bytes``, or it held more entries than ``max_response_entries``."""

    broker: str  # host:port (node id)
    reason: str  # "frame_bytes" or "entries"
    detail: str  # one sentence: which broker sent what, for last_error, the log and the console


class ResponseRefused(Exception):
    """A poll read a broker answer over a bound: the poll fails, the cluster is shown down with the refusal."""

    def __init__(self, cluster: str, refusals: tuple[Refusal, ...]) -> None:
        more = f" (+{len(refusals) - 1} more)" if len(refusals) > 1 else ""
        super().__init__(f"cluster {cluster!r}: {refusals[0].detail}{more}")
        self.cluster = cluster
        self.refusals = refusals


@dataclass(frozen=True, slots=True)
class AbortOutcome:
    """What an admin abort (``kafka-transactions.sh abort``) found and did; ``error`` says why nothing was written."""

    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int | None
    leader_id: int | None
    txn_start_offset: int | None
    dry_run: bool
    aborted: bool
    error: RequestError | None = None


@dataclass(frozen=True, slots=True)
class TerminateOutcome:
    """What an abort by transactional id (Kafka 4.1's ``forceTerminateTransaction``) found and did.

    ``state``, ``producer_id``/``producer_epoch`` and ``partitions`` are the coordinator's description before the
    call; ``new_producer_id``/``new_producer_epoch`` what InitProducerId answered once the abort completed.
    ``started`` is True once the coordinator began the abort (it answered CONCURRENT_TRANSACTIONS to the first
    InitProducerId): from then on Kafka completes it whatever the caller does.  ``error`` says why nothing was
    done (a refusal) or, with ``started``, why the completion was not seen."""

    transactional_id: str
    dry_run: bool
    coordinator_id: int | None = None
    state: str | None = None
    producer_id: int | None = None
    producer_epoch: int | None = None
    partitions: tuple[TopicPartition, ...] = ()
    lowest_release: str | None = None
    started: bool = False
    aborted: bool = False
    new_producer_id: int | None = None
    new_producer_epoch: int | None = None
    error: RequestError | None = None


@dataclass(frozen=True, slots=True)
class BrokerRelease:
    """One broker's Kafka release as its ApiVersions answer shows it, and its finalized ``transaction.version``.

    Brokers do not say their release on the wire; ``release`` is the newest (major, minor) whose API versions the
    answer carries (txnwatch.kafka.release), so it is exact for every line txnwatch knows and reads "or newer" for
    the newest of them (``newest_known``).  ``transaction_version`` is the finalized feature level (ApiVersions v3+,
    KIP-584); None when the broker finalizes none (3.x before KIP-890) or answered below v3."""

    node_id: int
    release: tuple[int, int]
    newest_known: bool = False
    transaction_version: int | None = None

    @property
    def label(self) -> str:
        return f"{self.release[0]}.{self.release[1]}" + ("+" if self.newest_known else "")


@dataclass(frozen=True, slots=True)
class BrokerTxnSignals:
    """A broker's other transaction figures, from the same JMX exporter as its verification figures.

    None means the exporter did not report the MBean (an older Kafka, the exporter's rules or
    ``includeObjectNames`` leave it out): each is optional on its own.

    * ``late_transaction_partitions``: ``kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount``,
      partitions led here with a transaction open longer than ``transaction.max.timeout.ms`` (the broker's
      only threshold; txnwatch's own hanging detection adds the coordinator's view and per-id timeouts).
    * ``lso_lag``: ``kafka.cluster:type=Partition,name=LastStableOffsetLag`` per (topic, partition): the
      broker's high watermark minus its LSO, in offsets.
    * ``marker_unknown_destination_queue`` / ``marker_log_append_retry_queue``:
      ``kafka.coordinator.transaction:type=TransactionMarkerChannelManager``, markers waiting for a partition
      leader to be known, and completed marker writes waiting to be logged again by the coordinator.
    * ``coordinator_load_ms_max`` / ``_avg``: ``kafka.server:type=transaction-coordinator-metrics``
      ``partition-load-time-max``/``-avg``, how long loading a ``__transaction_state`` partition took on
      this broker (its coordinator answers COORDINATOR_LOAD_IN_PROGRESS meanwhile).
    """

    late_transaction_partitions: int | None = None
    lso_lag: tuple[tuple[str, int, int], ...] | None = None
    marker_unknown_destination_queue: int | None = None
    marker_log_append_retry_queue: int | None = None
    coordinator_load_ms_max: float | None = None
    coordinator_load_ms_avg: float | None = None


@dataclass(frozen=True, slots=True)
class BrokerVerification:
    """One broker's own KIP-890 verification figures, read from its Prometheus JMX exporter.

    The MBeans are ``kafka.server:type=AddPartitionsToTxnManager,name=VerificationTimeMs`` (a Yammer
    histogram: ``verifications`` is its Count, the time from a partition leader asking the coordinator
    to verify a transactional write until the answer, with the broker's own recent percentiles) and
    ``name=VerificationFailureRate`` (a meter: ``failures`` is its Count, writes the coordinator refused,
    ``failures_per_second_1m`` its one-minute rate).  These are what a poller cannot see: a write the
    broker rejected never reaches a partition.  ``error`` says why the figures are missing (exporter
    unreachable, MBeans absent on that broker); None fields were not reported.
    """

    broker: str
    url: str
    error: str | None = None
    verifications: int | None = None
    time_ms_mean: float | None = None
    time_ms_max: float | None = None
    #: (quantile, ms) as the broker reports them, e.g. ((0.5, 1.0), (0.99, 19.7)).
    time_ms_quantiles: tuple[tuple[float, float], ...] = ()
    failures: int | None = None
    failures_per_second_1m: float | None = None
    #: The broker's other transaction signals, parsed even when the verification MBeans are absent.
    signals: BrokerTxnSignals = BrokerTxnSignals()

    @property
    def ok(self) -> bool:
        return self.error is None


class TimeLagUnknown(StrEnum):
    """Why a group partition's time lag is unknown rather than measured or estimated (the metric's ``reason``)."""

    #: The first unconsumed record lies past the decompression budget of its batch (a compression bomb or its
    #: neighbours, see kafka.records).
    RECORD_OVER_BUDGET = "record_over_budget"
    #: The batch holding it cannot be read at all (damaged, failed CRC, unknown codec).
    RECORD_UNREADABLE = "record_unreadable"


@dataclass(frozen=True, slots=True)
class UnreadableRecord:
    """The first unconsumed record at a committed offset was fetched but cannot be read."""

    reason: TimeLagUnknown
    detail: str

    def __str__(self) -> str:
        return f"{self.reason.value}: {self.detail}"


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class ListedTransaction:
    """One row of ListTransactions from one broker (the coordinator of that id)."""

    transactional_id: str
    producer_id: int
    state: TxnState
    coordinator_id: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    """DescribeTransactions for one transactional id, as its coordinator sees it."""

    transactional_id: str
    coordinator_id: int
    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None
    partitions: frozenset[TopicPartition] = frozenset()


@dataclass(frozen=True, slots=True)
class ProducerState:
    """DescribeProducers for one producer on one partition (the partition leader's view)."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp_ms: int | None
    coordinator_epoch: int
    current_txn_start_offset: int | None

    @property
    def has_open_txn(self) -> bool:
        return self.current_txn_start_offset is not None


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """Offsets and active producers of one partition.

    Any field may be ``None`` when its request failed; ``producers`` is ``None``
    (not empty) when DescribeProducers could not be asked, so detection can tell
    "no open transaction" from "don't know".
    """

    tp: TopicPartition
    leader: int | None
    high_watermark: int | None
    last_stable_offset: int | None
    log_start_offset: int | None = None
    producers: tuple[ProducerState, ...] | None = None


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    """A consumer group and its committed offsets."""

    group_id: str
    state: str | None
    protocol_type: str | None
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything one poll of one cluster saw.

    ``taken_at_ms`` is the wall-clock start of the poll; detection measures ages
    against it (or an injected clock), never against ``time.time()``.
    ``listing_complete`` is False when ListTransactions failed on some broker: then
    a transactional id missing from ``listed`` may simply live on that broker.
    ``unreachable_coordinators`` holds broker ids whose DescribeTransactions failed.
    """

    cluster: str
    taken_at_ms: int
    duration_ms: int
    brokers: tuple[BrokerInfo, ...] = ()
    controller_id: int | None = None
    listed: tuple[ListedTransaction, ...] = ()
    transactions: Mapping[str, TransactionDescription] = field(default_factory=dict)
    partitions: Mapping[TopicPartition, PartitionSnapshot] = field(default_factory=dict)
    groups: Mapping[str, GroupSnapshot] = field(default_factory=dict)
    errors: tuple[RequestError, ...] = ()
    listing_complete: bool = True
    unreachable_coordinators: frozenset[int] = frozenset()
    max_transaction_timeout_ms: int = 900_000
    #: (partition, committed offset) -> timestamp (ms) of the first data record at or after that offset,
    #: None when only control markers lie between it and the high watermark.  Filled for lagging group
    #: partitions, a bounded number per poll (kafka.records); a missing key means "not fetched".
    first_unconsumed_ms: Mapping[tuple[TopicPartition, int], int | None] = field(default_factory=dict)
    #: (partition, committed offset) -> why the first record at or after that offset cannot be read (past the
    #: decompression budget, a damaged batch): the time lag there is unknown, not estimated.
    unreadable_records: Mapping[tuple[TopicPartition, int], UnreadableRecord] = field(default_factory=dict)
    #: (partition, committed offset) -> data records a read_committed consumer gets from that offset up to this
    #: snapshot's LSO (control markers and aborted transactions' records left out; kafka.record_count).  Filled
    #: for group partitions behind the LSO once the bounded reads have counted up to it; missing: not known.
    committed_records: Mapping[tuple[TopicPartition, int], int] = field(default_factory=dict)
    #: The brokers' own VerificationTimeMs / VerificationFailureRate, one per configured JMX exporter
    #: (cluster option broker_metrics_urls / broker_metrics_url_template); empty when none is configured.
    broker_verification: tuple[BrokerVerification, ...] = ()
    #: Consumer groups the cluster listed that groups_include/groups_exclude left out (their offsets are not fetched).
    groups_filtered: int = 0
    #: The cluster's transactional_id_pattern when set: ``listed`` then holds only the ids it matches, so a
    #: producer id missing from it may belong to an id out of scope rather than to none.
    transactional_id_pattern: str | None = None
    #: Each broker's release and finalized transaction.version (ApiVersions), in broker order; empty when not asked.
    broker_releases: tuple[BrokerRelease, ...] = ()

    #: producer id -> its transactional ids, built on first use (see transactional_ids_for_producer).
    _ids_by_producer: dict[int, tuple[str, ...]] | None = field(default=None, init=False, repr=False, compare=False)

    def transactional_ids_for_producer(self, producer_id: int) -> tuple[str, ...]:
        """Indexed once per snapshot: detection asks this for every open producer, and a scan of
        ``listed`` per question was the biggest cost of a poll at 50,000 ids (benchmarks/scale.py)."""
        index = self._ids_by_producer
        if index is None:
            grouped: dict[int, list[str]] = {}
            for t in self.listed:
                grouped.setdefault(t.producer_id, []).append(t.transactional_id)
            index = {pid: tuple(ids) for pid, ids in grouped.items()}
            object.__setattr__(self, "_ids_by_producer", index)  # a cache, not state: frozen for callers
        return index.get(producer_id, ())


# ---------------------------------------------------------------------------------------------
# The coordinators' own log (__transaction_state), record by record (see txnwatch.kafka.txnlog).
# ---------------------------------------------------------------------------------------------


class TxnLogKind(StrEnum):
    """What one ``__transaction_state`` record turned out to be."""

    VALUE = "value"              # a TransactionLogValue: the id's full state after one transition
    TOMBSTONE = "tombstone"      # null value: the id expired (transactional.id.expiration.ms) and was removed
    UNDECODABLE = "undecodable"  # an id we could read but a value we could not (new version, damaged bytes)


class TxnLogRecord(NamedTuple):
    """One record of ``__transaction_state``, decoded.

    A NamedTuple rather than a dataclass: a busy cluster writes tens of thousands of
    these a second and tuple construction is several times cheaper.  ``state`` is
    :attr:`TxnState.UNKNOWN` with ``raw_status`` set for a status byte Kafka added after
    this code was written; ``unknown_tags`` keeps tagged fields we do not know, raw, and
    ``problem``/``raw_value`` say why an UNDECODABLE value could not be read.  Times are the
    coordinator's own (``last_update_ms`` is when it made the transition).
    """

    transactional_id: str
    log_partition: int
    offset: int
    timestamp_ms: int | None
    kind: TxnLogKind
    state: TxnState | None = None
    raw_status: int | None = None
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    partitions: tuple[tuple[str, int], ...] = ()
    last_update_ms: int = 0
    start_ms: int | None = None
    previous_producer_id: int | None = None
    next_producer_id: int | None = None
    client_transaction_version: int = 0
    value_version: int = 0
    unknown_tags: tuple[tuple[int, bytes], ...] = ()
    problem: str | None = None
    raw_value: bytes | None = None
    #: NextProducerEpoch (tag 3, Kafka 4.3+): the epoch that goes with ``next_producer_id``.  Last, so that
    #: records built by position before it existed stay valid.
    next_producer_epoch: int | None = None

    @property
    def at_ms(self) -> int:
        """When it happened: the coordinator's transition time, else the append time."""
        if self.kind is TxnLogKind.VALUE and self.last_update_ms > 0:
            return self.last_update_ms
        return self.timestamp_ms or 0
