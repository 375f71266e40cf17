"""The transactional canary's shared types: what one round found, and the finding "transactions cannot commit".

One concept, one type, from the Kafka layer (txnwatch.kafka.canary: the steps' errors as data) through the pure
rules (txnwatch.detect.canary: latency bookkeeping, blame, the finding's open and close) to the metrics, the
alert and the API.  Times are epoch milliseconds (wall clock, for the finding's ``since``) and durations
milliseconds (measured on a monotonic clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from txnwatch.core.model import ErrorClass


class CanaryStage(StrEnum):
    """Where a canary transaction failed (label ``stage``): each stage needs another part of the cluster.

    ``coordinator``, ``init``, ``begin`` and ``commit`` need the id's transaction coordinator (and the leader and ISR
    of its ``__transaction_state`` partition, where each state change is written before it is answered);
    ``produce`` needs the leader of the canary's partition; ``visibility`` needs the markers written there, so that
    the partition's LSO passes the record and a read_committed reader is handed it.  ``topic`` is the canary's own
    topic management (create it, give every broker a partition to lead)."""

    TOPIC = "topic"
    COORDINATOR = "coordinator"
    INIT = "init"
    BEGIN = "begin"
    PRODUCE = "produce"
    COMMIT = "end_txn"
    VISIBILITY = "visibility"

    @property
    def needs_coordinator(self) -> bool:
        return self in _COORDINATOR_STAGES


_COORDINATOR_STAGES = frozenset({CanaryStage.COORDINATOR, CanaryStage.INIT, CanaryStage.BEGIN, CanaryStage.COMMIT})


@dataclass(frozen=True, slots=True)
class StepError:
    """One failed step, as data: Kafka's error name and its KIP-1050 class (txnwatch.kafka.error_classes)."""

    stage: CanaryStage
    name: str
    error_class: ErrorClass = ErrorClass.UNKNOWN
    message: str = ""


@dataclass(frozen=True, slots=True)
class CoordinatorLocation:
    """Who coordinates the canary's transactional id right now, and the ``__transaction_state`` partition behind it.

    The partition is Kafka's own choice (``TransactionStateManager.partitionFor``: the id's Java ``hashCode``,
    made non-negative, modulo the topic's partition count), so it is known even when FindCoordinator fails; its
    ``leader`` is None while it has none (offline) and ``replicas`` say which brokers could lead it again."""

    broker_id: int | None = None
    state_partition: int | None = None
    state_leader: int | None = None
    state_replicas: tuple[int, ...] = ()
    error: StepError | None = None


@dataclass(frozen=True, slots=True)
class CanaryAttempt:
    """One canary transaction: begin, one record to ``partition``, commit; then a read_committed reader sees it.

    ``commit_ms`` is begin to the commit acknowledged; ``visible_ms`` the commit acknowledged to the reader being
    handed the record (the LSO passed it).  ``partition`` is None for a failure before any partition was tried
    (the topic, the coordinator, InitProducerId)."""

    partition: int | None
    leader_id: int | None
    error: StepError | None = None
    commit_ms: int | None = None
    visible_ms: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(frozen=True, slots=True)
class CanaryRound:
    """One round of the canary: a transaction per partition of its topic (one partition led by each broker)."""

    at_ms: int
    transactional_id: str
    coordinator: CoordinatorLocation
    attempts: tuple[CanaryAttempt, ...]

    @property
    def ok(self) -> bool:
        return bool(self.attempts) and all(a.ok for a in self.attempts)

    @property
    def failures(self) -> tuple[CanaryAttempt, ...]:
        return tuple(a for a in self.attempts if not a.ok)


class BlameKind(StrEnum):
    """What the finding blames (label ``blame``)."""

    #: The id's coordinator answered with an error or not at all.
    COORDINATOR = "coordinator"
    #: The id's ``__transaction_state`` partition has no leader: no broker can coordinate it.
    TRANSACTION_STATE_PARTITION = "transaction_state_partition"
    #: The leader of a canary partition did not take the record, or its markers never made it visible.
    PARTITION_LEADER = "partition_leader"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Blame:
    """The part of the cluster a failed round points at, with the sentence on-call reads."""

    kind: BlameKind
    broker_id: int | None
    state_partition: int | None
    text: str


@dataclass(frozen=True, slots=True)
class CanaryFailure:
    """The finding "transactions cannot commit": the canary's rounds kept failing.

    Opened after ``failures_to_alert`` failed rounds in a row (txnwatch.detect.canary), closed by the first round
    that commits everywhere; ``since_ms`` is the first failed round of the streak."""

    transactional_id: str
    since_ms: int
    last_failure_ms: int
    failed_rounds: int
    blame: Blame
    error: StepError
    failing_partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class CanaryView:
    """What the API and the console show of one cluster's canary: its id and topic, its latest round, the open
    finding and the last error a round could not turn into data (a client that could not be built).

    Published into the cluster's view (txnwatch.core.views.ClusterView.canary) after every round by the replica
    whose canary runs, so a request reads it as it reads the latest poll, and API workers get it with the views."""

    transactional_id: str
    topic: str
    interval_s: float
    last_round: CanaryRound | None = None
    finding: CanaryFailure | None = None
    last_error: str | None = None


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units, wrapping at 32 bits): Kafka hashes ids with it."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def transaction_state_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of an id: Kafka's ``Utils.abs(id.hashCode) % partitions``
    (``TransactionStateManager.partitionFor``).  ``Utils.abs`` is ``Math.abs`` except that ``Integer.MIN_VALUE``
    maps to 0 (not to itself); it is not ``Utils.toPositive``, the partitioner's sign mask."""
    h = java_string_hash(transactional_id)
    return 0 if h == -(1 << 31) else abs(h) % partitions
