"""What detection finds: the one home of the types ``detect/`` returns and every sink reads, the one
:class:`Transition` of both readers (polls and the coordinators' log) among them.

``detect/`` holds the rules and the detector's own state; what one poll of one cluster revealed
(:class:`Findings`, and each kind of finding in it) lives here, in core, so the store, ``/metrics``,
alerting and the API read the one shape detection makes without importing detection itself (the
serving rooms may not: docs/architecture.md), and a sink's contract is typed, not ``Any``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from txnwatch.core.model import TopicPartition, TxnState, UnreadableRecord
from txnwatch.core.vocabulary import HangingReason, LingeringReason, TransitionSource


class Transition(NamedTuple):
    """One change of a transactional id's coordinator state, whichever source saw it (``source``).

    Polls infer one between two DescribeTransactions answers (``detect.transitions``); the coordinators' own log
    gives one per record (``detect.txnlog_rules``), with the record's position, the client's transaction version
    and what the record said beyond its fields (``detail``).  The same type travels to the store, the timeline the
    API and the console show, and the counters, as Burrow hands offsets from two sources to one storage type.

    A NamedTuple, all fields required: the log's tail builds one per record, tens of thousands a second, as a plain
    tuple in this order (benchmarks/txnlog.py), and stores the first 17 fields as the stream row's columns by
    position (store/txnlog.STREAM_COLUMNS, store/_stream_params.c: tests pin the order).
    """

    transactional_id: str
    #: When it happened: the record's last update (the log) or the poll's time (a poll).
    at_ms: int
    #: The __transaction_state partition and offset of the record; None for a change inferred between polls.
    log_partition: int | None
    log_offset: int | None
    #: Coordinator states by name (``TxnState`` values); the log may name a status byte it does not know,
    #: ``Unknown(<byte>)``.  ``from_state`` is None at an id's first sighting.
    from_state: str | None
    to_state: str
    producer_id: int
    producer_epoch: int
    prev_producer_id: int | None
    prev_producer_epoch: int | None
    timeout_ms: int
    start_ms: int | None
    #: (topic, partition) pairs: the record's order from the log, sorted from a poll.
    partitions: tuple[tuple[str, int], ...]
    #: ``TxnEvent`` values: what the change means.
    events: tuple[str, ...]
    duration_ms: int | None
    #: ClientTransactionVersion the coordinator wrote with the record (2 = KIP-890 part 2); None from a poll.
    client_transaction_version: int | None
    #: What the record said beyond its fields (a coming producer id rotation, unknown tags or status, raw).
    detail: str | None
    source: TransitionSource


def incident_key(cluster: str, tp: TopicPartition, producer_id: int) -> str:
    """Stable identity of a per-partition incident (PagerDuty dedup_key, hanging episode key)."""
    return f"{cluster}/{tp}/{producer_id}"


@dataclass(frozen=True, slots=True)
class HangingTransaction:
    """An open transaction on a partition that no coordinator will ever finish (KIP-664 semantics)."""

    cluster: str
    tp: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    transactional_id: str | None
    coordinator_id: int | None
    reason: HangingReason
    txn_start_offset: int
    last_timestamp_ms: int
    age_ms: int

    @property
    def incident_key(self) -> str:
        return incident_key(self.cluster, self.tp, self.producer_id)


@dataclass(frozen=True, slots=True)
class Undetermined:
    """A partition or old open transaction detection could not judge: neither hanging nor healthy.

    ``producer_id`` is None when the partition's leader could not be asked who writes to it.
    """

    cluster: str
    tp: TopicPartition
    producer_id: int | None
    why: str
    transactional_id: str | None = None
    coordinator_id: int | None = None


@dataclass(frozen=True, slots=True)
class OverdueTransaction:
    """Open longer than its own transaction.timeout.ms plus grace: the coordinator should have aborted it."""

    cluster: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    start_time_ms: int
    timeout_ms: int
    age_ms: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class LingeringTransaction:
    """An Ongoing transaction of a Flink KafkaSink that Flink will never finish (txnwatch.detect.lingering).

    ``prefix``/``subtask``/``checkpoint`` are read from the id (txnwatch.core.frameworks); ``superseded_by`` is the
    newer committed transaction of the same sink subtask that proves it (SUPERSEDED), None for JOB_GONE.
    """

    cluster: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    prefix: str
    subtask: int
    checkpoint: int
    reason: LingeringReason
    start_time_ms: int
    timeout_ms: int
    age_ms: int
    partitions: frozenset[TopicPartition]
    superseded_by: str | None = None
    superseded_checkpoint: int | None = None



@dataclass(frozen=True, slots=True)
class StuckPrepare:
    """PrepareCommit/PrepareAbort for longer than a threshold: markers are not getting written."""

    cluster: str
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: TxnState
    since_ms: int
    duration_ms: int
    partitions: frozenset[TopicPartition]


@dataclass(frozen=True, slots=True)
class LsoStall:
    """An LSO stall episode; ``ended_ms`` is None while it lasts."""

    cluster: str
    tp: TopicPartition
    started_ms: int
    last_seen_ms: int
    stalled_lso: int
    max_gap: int
    gap: int
    blocking_producer_id: int | None
    blocking_producer_epoch: int | None
    blocking_transactional_id: str | None
    ended_ms: int | None = None

    @property
    def incident_key(self) -> str:
        """Per partition: the blocking producer may be unknown at first and must not change the key."""
        return f"{self.cluster}/{self.tp}"


@dataclass(frozen=True, slots=True)
class VerificationOutcome:
    """One partition/open-transaction pair resolved: verified after ``verification_ms``, or failed."""

    cluster: str
    tp: TopicPartition
    producer_id: int
    transactional_id: str | None
    observed_ms: int
    verification_ms: int | None
    failed: bool


@dataclass(frozen=True, slots=True)
class GroupLag:
    """Lag of one group on one partition: vs the LSO (read_committed truth) and vs the high watermark."""

    cluster: str
    group_id: str
    tp: TopicPartition
    committed: int
    lag_hwm: int | None
    lag_lso: int | None
    lag_seconds: float | None
    #: When txnwatch first saw the committed offset at its current value (see detect.lag.track_commits).
    last_commit_ms: int | None = None
    #: Why ``lag_seconds`` is unknown when the first unconsumed record cannot be read (ClusterSnapshot.unreadable_records).
    lag_seconds_unknown: UnreadableRecord | None = None
    #: Records a read_committed consumer still reads up to the LSO (markers and aborted records excluded);
    #: None when not (yet) counted (ClusterSnapshot.committed_records).
    lag_records: int | None = None


@dataclass(frozen=True, slots=True)
class VerificationCheck:
    checks: int
    failures: int
    samples: tuple[VerificationOutcome, ...]
    #: The pairs counted as failures this poll (partition, producer id, transactional id), sorted: what a warning
    #: names, so it says which transactions rather than a ratio whose denominator moves with the traffic.
    failing: tuple[tuple[TopicPartition, int, str | None], ...] = ()


@dataclass(frozen=True, slots=True)
class ExporterLag:
    """One ``kafka_consumergroup_{current_offset,lag}`` pair; ``lag`` None where kafka_exporter emits no lag."""

    group_id: str
    tp: TopicPartition
    committed: int
    lag: int | None


@dataclass(frozen=True, slots=True)
class ExporterTopicSum:
    """One ``kafka_consumergroup_{current_offset,lag}_sum`` pair."""

    group_id: str
    topic: str
    committed_sum: int
    lag_sum: int


@dataclass(frozen=True, slots=True)
class Findings:
    """What one poll of one cluster revealed; consumed by the store, /metrics and alerting.

    Level-style fields (hanging, undetermined, overdue, stuck_prepare, lso_stalls, lags)
    describe *now* and are complete every poll, so a consumer resolves whatever is absent.
    Edge-style fields (lso_stalls_opened/ended, transitions, verification samples) happen
    once and are reported in the poll that saw them.
    """

    cluster: str
    now_ms: int
    hanging: tuple[HangingTransaction, ...] = ()
    undetermined: tuple[Undetermined, ...] = ()
    overdue: tuple[OverdueTransaction, ...] = ()
    stuck_prepare: tuple[StuckPrepare, ...] = ()
    lso_stalls: tuple[LsoStall, ...] = ()
    lso_stalls_opened: tuple[LsoStall, ...] = ()
    lso_stalls_ended: tuple[LsoStall, ...] = ()
    verification: VerificationCheck = VerificationCheck(0, 0, ())  # frozen: one shared empty value is safe
    transitions: tuple[Transition, ...] = ()
    lags: tuple[GroupLag, ...] = ()
    exporter_lags: tuple[ExporterLag, ...] = ()
    #: What the group caps and filters left out of ``lags``/``exporter_lags``: (kind, reason) -> count.
    omitted: Mapping[tuple[str, str], int] = field(default_factory=dict)
    #: Flink sink transactions Flink will never finish (level-style), most lingering first.
    lingering: tuple[LingeringTransaction, ...] = ()
