"""The one list of words txnwatch uses: transaction states and events, hanging reasons, alerts.

* the coordinator's transaction states, which of them are *open*, and Kafka's valid
  previous states of each (``TransactionState.validPreviousStates``, kept beside the
  states as Kafka keeps them);
* the events a transition carries (commit, fenced, illegal_transition...): counter keys,
  transition rows, API enums, metrics, console and pipeline all name them from here;
* hanging reasons, alerts and their severities.

Code (detection, alerting, store, metrics), the API schema (enums), docs/metrics.md (a
generated section, checked by a test), the Prometheus rules, the dashboards, the console
and the pipeline all take these from here, so a word cannot be spelled two ways, mean two
things or be documented without existing.  Pure data: importing it costs nothing and
touches no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final

RUNBOOK_DOC: Final = "docs/runbooks.md"


class TxnState(StrEnum):
    """Coordinator-side transaction states as DescribeTransactions names them (Kafka's ``TransactionState``)."""

    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"
    DEAD = "Dead"
    UNKNOWN = "Unknown"

    @classmethod
    def parse(cls, raw: str | None) -> TxnState:
        """Map a wire state name to the enum; anything unexpected is UNKNOWN, never an error."""
        if not raw:
            return cls.UNKNOWN
        return _TXN_STATES_BY_NAME.get(raw.lower(), cls.UNKNOWN)  # a dict: called per id per poll (50k+)

    @property
    def is_open(self) -> bool:
        """One of :data:`OPEN_STATES`: the transaction still pins the LSO of its partitions."""
        return self in _OPEN

    @property
    def is_prepare(self) -> bool:
        return self in _PREPARE

    @property
    def is_complete(self) -> bool:
        return self in _COMPLETE


_TXN_STATES_BY_NAME: Final[dict[str, TxnState]] = {member.value.lower(): member for member in TxnState}

#: The status byte of each state in ``__transaction_state`` values, by id (TransactionState.java's ids).
STATE_BY_ID: Final[tuple[TxnState, ...]] = (
    TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT,
    TxnState.COMPLETE_ABORT, TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE)

#: States of an open transaction: its markers are not written yet, so it pins the LSO of every partition
#: it wrote to.  PrepareEpochFence is one: it is an Ongoing transaction that a new producer instance's
#: InitProducerId is fencing; the coordinator aborts it next (PrepareAbort), and until the markers are
#: written read_committed consumers wait on it like on any other.  Ordered as Kafka lists them (the order
#: of metric series and API enums).
OPEN_STATES: Final[tuple[TxnState, ...]] = (
    TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
#: Open states in which the outcome is decided and only the markers are missing (or, for the fence, the abort).
PREPARE_STATES: Final[tuple[TxnState, ...]] = (
    TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE)
#: States of a finished transaction: its markers are written.
COMPLETE_STATES: Final[tuple[TxnState, ...]] = (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_OPEN, _PREPARE, _COMPLETE = frozenset(OPEN_STATES), frozenset(PREPARE_STATES), frozenset(COMPLETE_STATES)

#: Kafka's ``TransactionState.validPreviousStates`` (transaction-coordinator, Kafka 4.x): the states a
#: coordinator may move each state from.  The log shows every move, so any other is illegal there.
VALID_PREVIOUS: Final[Mapping[TxnState, frozenset[TxnState]]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE, TxnState.EMPTY,
                                       TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}


def _within_one_transaction(start: TxnState) -> frozenset[TxnState]:
    """States one transaction reaches from ``start`` by valid moves: only an open state moves on within
    it (a Complete* state ends it; whatever follows starts the next transaction)."""
    reached: set[TxnState] = set()
    todo = [start]
    while todo:
        state = todo.pop()
        if state not in _OPEN:
            continue
        for following, previous in VALID_PREVIOUS.items():
            if state in previous and (following in _OPEN or following in _COMPLETE) and following not in reached:
                reached.add(following)
                todo.append(following)
    return frozenset(reached)


#: What polling may call illegal: states one transaction (same producer id and start time) can never reach
#: from the state seen before, whatever moves happened unseen between two polls.  Derived from
#: :data:`VALID_PREVIOUS`, so both histories judge moves by the one table; staying in a state is no move.
ILLEGAL_WITHIN_TRANSACTION: Final[Mapping[TxnState, frozenset[TxnState]]] = {
    prev: illegal for prev in (*OPEN_STATES, *COMPLETE_STATES)
    if (illegal := frozenset(OPEN_STATES + COMPLETE_STATES) - _within_one_transaction(prev) - {prev})}


class TxnEvent(StrEnum):
    """What a transition means: counter keys, transition rows' ``events``, API enums, metrics, console, pipeline.

    Polling (``detect.transitions``) and the transaction log (``detect.txnlog``) derive them each in their
    own way (their module docs say how); the words and their meaning (:data:`EVENTS`) are the same.
    """

    NEW = "new"
    COMMIT = "commit"
    ABORT = "abort"
    COMPLETED_BETWEEN_POLLS = "completed_between_polls"
    EPOCH_BUMP = "epoch_bump"
    PRODUCER_ID_CHANGE = "producer_id_change"
    TIMEOUT_ABORT = "timeout_abort"
    FENCED = "fenced"
    INIT_PRODUCER_ID = "init_producer_id"
    ILLEGAL_TRANSITION = "illegal_transition"
    EXPIRED = "expired"
    UNKNOWN_RECORD = "unknown_record"
    UNKNOWN_STATE = "unknown_state"
    UNKNOWN_FIELDS = "unknown_fields"
    STUCK_PREPARE = "stuck_prepare"
    LONG_TRANSACTION = "long_transaction"


#: What each event means to the person reading a transaction's history (docs/metrics.md shows these).
EVENTS: Final[dict[TxnEvent, str]] = {
    TxnEvent.NEW: "First sighting of the id (under polling also after a restart of txnwatch: not a real start).",
    TxnEvent.COMMIT: "The transaction committed; counted once per transaction.",
    TxnEvent.ABORT: "The transaction aborted, timeout aborts and fences included; counted once per transaction.",
    TxnEvent.COMPLETED_BETWEEN_POLLS: "Polling only: a new transaction of the same producer id is open; the one "
                                      "before ended unseen, outcome unknown.",
    TxnEvent.EPOCH_BUMP: "The producer epoch rose within one producer id, counted by how much it rose (under "
                         "transaction version 2 every commit and abort bumps once).",
    TxnEvent.PRODUCER_ID_CHANGE: "The id moved to another producer id (KIP-360: epoch exhaustion, or a fresh "
                                 "InitProducerId).",
    TxnEvent.TIMEOUT_ABORT: "The coordinator aborted a transaction that outlived its transaction.timeout.ms, "
                            "bumping the epoch so the late producer is fenced (KIP-588).",
    TxnEvent.FENCED: "A new producer instance's InitProducerId ended an open transaction before its timeout.",
    TxnEvent.INIT_PRODUCER_ID: "InitProducerId on an idle id: a producer started or restarted with it.",
    TxnEvent.ILLEGAL_TRANSITION: "A move Kafka's state machine does not allow (the valid previous states above), "
                                 "e.g. PrepareCommit -> PrepareAbort.",
    TxnEvent.EXPIRED: "The coordinator removed the id (transactional.id.expiration.ms).",
    TxnEvent.UNKNOWN_RECORD: "Transaction log only: a record txnwatch could not decode; kept with its raw bytes.",
    TxnEvent.UNKNOWN_STATE: "Transaction log only: a transaction status this txnwatch does not know.",
    TxnEvent.UNKNOWN_FIELDS: "Transaction log only: tagged fields or a value version this txnwatch does not know.",
    TxnEvent.STUCK_PREPARE: "Transaction log only: a transaction in Prepare* longer than "
                            "detection.prepare_stuck_seconds.",
    TxnEvent.LONG_TRANSACTION: "Transaction log only: an Ongoing transaction past its transaction.timeout.ms "
                               "plus grace.",
}

# Each event's word as a plain string, bound here once beside the enum.  The transaction log's rules name one or
# more per record (tens of thousands of records a second): a module global is read about 5x faster than an enum
# member on CPython 3.11 (``EnumType`` attribute lookup), and transition rows, counter keys and the API hold the
# plain word.  tests/unit/test_vocabulary.py checks that each is its member's value.
NEW: Final = TxnEvent.NEW.value
COMMIT: Final = TxnEvent.COMMIT.value
ABORT: Final = TxnEvent.ABORT.value
COMPLETED_BETWEEN_POLLS: Final = TxnEvent.COMPLETED_BETWEEN_POLLS.value
EPOCH_BUMP: Final = TxnEvent.EPOCH_BUMP.value
PRODUCER_ID_CHANGE: Final = TxnEvent.PRODUCER_ID_CHANGE.value
TIMEOUT_ABORT: Final = TxnEvent.TIMEOUT_ABORT.value
FENCED: Final = TxnEvent.FENCED.value
INIT_PRODUCER_ID: Final = TxnEvent.INIT_PRODUCER_ID.value
ILLEGAL_TRANSITION: Final = TxnEvent.ILLEGAL_TRANSITION.value
EXPIRED: Final = TxnEvent.EXPIRED.value
UNKNOWN_RECORD: Final = TxnEvent.UNKNOWN_RECORD.value
UNKNOWN_STATE: Final = TxnEvent.UNKNOWN_STATE.value
UNKNOWN_FIELDS: Final = TxnEvent.UNKNOWN_FIELDS.value
STUCK_PREPARE: Final = TxnEvent.STUCK_PREPARE.value
LONG_TRANSACTION: Final = TxnEvent.LONG_TRANSACTION.value


class TransitionSource(StrEnum):
    """Who saw a transition (and an id's state): the coordinators' own log, exact, or a poll, which samples it.

    One transition type carries it (``core.findings.Transition.source``), and the store's ``source`` column, the API
    and the console name the same two words (the log's rows win where both speak)."""

    TRANSACTION_LOG = "transaction_log"
    POLL = "poll"


# Built-in alert rules (config ``alert_rules``, PagerDuty details, the API's ``rule``).
HANGING_TRANSACTION: Final = "hanging_transaction"
TRANSACTION_TIMEOUT_EXCEEDED: Final = "transaction_timeout_exceeded"
PREPARE_STUCK: Final = "prepare_stuck"
LSO_STALL: Final = "lso_stall"
VERIFICATION_FAILURE_RATE: Final = "verification_failure_rate"
CLUSTER_DOWN: Final = "cluster_down"
FLINK_LINGERING_TRANSACTION: Final = "flink_lingering_transaction"
TRANSACTIONS_CANNOT_COMMIT: Final = "transactions_cannot_commit"


class HangingReason(StrEnum):
    """Why an old open transaction on a partition will never get its marker (see :data:`REASONS`)."""

    #: No coordinator lists a transactional id for the producer id (Kafka's first rule).
    NO_TRANSACTIONAL_ID = "no_transactional_id"
    #: The id was listed, but its coordinator answered TRANSACTIONAL_ID_NOT_FOUND (Kafka's second rule).
    UNKNOWN_TO_COORDINATOR = "unknown_to_coordinator"
    #: The coordinator's transaction for the id does not include the partition (Kafka's third rule).
    PARTITION_NOT_LISTED = "partition_not_listed"
    #: The id now belongs to another producer id: the coordinator has moved on from this one.
    PRODUCER_ID_MISMATCH = "producer_id_mismatch"


@dataclass(frozen=True, slots=True)
class Term:
    """One word of the vocabulary: what it means to the person on call, and what ends it."""

    name: str
    title: str
    explanation: str
    fix: str


REASONS: Final[dict[HangingReason, Term]] = {
    HangingReason.NO_TRANSACTIONAL_ID: Term(
        "no_transactional_id", "No coordinator knows this producer",
        "The partition holds an open transaction of a producer id that no transaction coordinator lists, "
        "so no coordinator will ever write its commit or abort marker.",
        "Abort it on the partition with the abort command (kafka-transactions abort --start-offset)."),
    HangingReason.UNKNOWN_TO_COORDINATOR: Term(
        "unknown_to_coordinator", "Coordinator forgot the transactional id",
        "The coordinator was asked about the producer's transactional id and answered that it does not "
        "know it (expired or never registered), so nothing will finish the open transaction.",
        "Abort it on the partition with the abort command (kafka-transactions abort --start-offset)."),
    HangingReason.PARTITION_NOT_LISTED: Term(
        "partition_not_listed", "Coordinator does not list this partition",
        "The producer wrote transactional records to this partition, but its coordinator's transaction does "
        "not include the partition (the write skipped AddPartitionsToTxn, the pre-KIP-890 bug), so the "
        "coordinator's commit or abort will never send a marker here.",
        "Abort it on the partition with the abort command; then upgrade clients and brokers so KIP-890 "
        "verification (transaction.partition.verification.enable) blocks such writes."),
    HangingReason.PRODUCER_ID_MISMATCH: Term(
        "producer_id_mismatch", "Transactional id moved to a new producer",
        "The transactional id now belongs to another producer id (the producer restarted or was fenced), "
        "so the coordinator will never finish the old producer's open transaction on this partition.",
        "Abort it on the partition with the abort command; the new producer instance is unaffected."),
}


class Severity(StrEnum):
    """PagerDuty Events v2 severities, most urgent first; the built-in rules' ``severity``."""

    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Route(StrEnum):
    """The Prometheus rules' ``severity`` label: Alertmanager pages on-call or files a ticket."""

    PAGE = "page"
    TICKET = "ticket"


@dataclass(frozen=True, slots=True)
class AlertSpec:
    """One alert as every part names it.

    ``rule`` is the built-in evaluator's name (config ``alert_rules``, PagerDuty details, the
    API), ``None`` for alerts only Prometheus can raise (about txnwatch itself);
    ``prometheus`` is the PrometheusRule alert name and the docs/runbooks.md heading.
    """

    rule: str | None
    prometheus: str
    severity: Severity
    route: Route
    for_seconds: int  # the built-in rule's default ``for:``; 0 for Prometheus-only alerts
    title: str
    explanation: str

    @property
    def anchor(self) -> str:
        """The GitHub-style anchor of the alert's section in docs/runbooks.md."""
        return self.prometheus.lower()

    @property
    def runbook(self) -> str:
        return f"{RUNBOOK_DOC}#{self.anchor}"


ALERTS: Final[tuple[AlertSpec, ...]] = (
    AlertSpec(HANGING_TRANSACTION, "KafkaHangingTransaction", Severity.CRITICAL, Route.PAGE, 60,
          "Hanging transaction",
          "A partition holds an open transaction nothing will finish; read_committed consumers of it are stuck."),
    AlertSpec(TRANSACTION_TIMEOUT_EXCEEDED, "KafkaTransactionPastTimeout", Severity.ERROR, Route.PAGE, 60,
          "Transaction past its timeout",
          "The coordinator should have aborted this transaction by now; its partitions' LSOs are pinned."),
    AlertSpec(PREPARE_STUCK, "KafkaTransactionStuckInPrepare", Severity.CRITICAL, Route.PAGE, 60,
          "Transaction stuck in Prepare",
          "Commit or abort is decided but the markers are not written: a partition leader is unavailable."),
    AlertSpec(LSO_STALL, "KafkaLSOStalled", Severity.CRITICAL, Route.PAGE, 120,
          "LSO stalled",
          "The last stable offset stands still while producers write: read_committed consumers see nothing new."),
    AlertSpec(FLINK_LINGERING_TRANSACTION, "FlinkLingeringTransaction", Severity.ERROR, Route.PAGE, 60,
          "Lingering Flink transaction",
          "A Flink sink transaction that Flink will never finish pins the LSO of its partitions until its timeout."),
    AlertSpec(VERIFICATION_FAILURE_RATE, "KafkaTransactionVerificationFailures", Severity.WARNING, Route.TICKET, 300,
          "Verification failures",
          "Partitions hold open transactions their coordinators do not list: the precursor of hanging ones."),
    AlertSpec(TRANSACTIONS_CANNOT_COMMIT, "KafkaTransactionsCannotCommit", Severity.CRITICAL, Route.PAGE, 30,
          "Transactions cannot commit",
          "txnwatch's own canary transaction keeps failing to commit (or to become visible to read_committed "
          "readers): producers of the cluster cannot commit either."),
    AlertSpec(CLUSTER_DOWN, "TxnwatchClusterUnreachable", Severity.CRITICAL, Route.PAGE, 120,
          "Kafka cluster unreachable",
          "txnwatch reaches no broker of the cluster; its transaction alerts are on hold meanwhile."),
    AlertSpec(None, "KafkaTransactionVerificationSlow", Severity.WARNING, Route.TICKET, 0,
          "Verification slow",
          "Coordinators take long to list partitions producers already wrote to (p99 above 30 s)."),
    AlertSpec(None, "TxnwatchDown", Severity.CRITICAL, Route.PAGE, 0,
          "txnwatch down", "Prometheus cannot scrape txnwatch: nothing watches the transactions."),
    AlertSpec(None, "TxnwatchDatabaseDown", Severity.WARNING, Route.TICKET, 0,
          "txnwatch database down", "History is buffered in memory and the API serves stale data."),
    AlertSpec(None, "TxnwatchOutboxStuck", Severity.WARNING, Route.TICKET, 0,
          "PagerDuty outbox stuck", "Built-in pages are not reaching PagerDuty."),
)

BY_RULE: Final[dict[str, AlertSpec]] = {a.rule: a for a in ALERTS if a.rule is not None}
BY_PROMETHEUS: Final[dict[str, AlertSpec]] = {a.prometheus: a for a in ALERTS}
RULES: Final[tuple[str, ...]] = tuple(BY_RULE)


class Framework(StrEnum):
    """Which framework named a transactional id (label ``framework``, API field ``framework``); txnwatch.core.frameworks
    reads the names."""

    #: Kafka Streams with ``processing.guarantee=exactly_once_v2``: one producer per stream thread.
    KAFKA_STREAMS_EOS_V2 = "kafka_streams_eos_v2"
    #: Kafka Streams with the old ``exactly_once`` (removed in Kafka 4.0): one producer per task.
    KAFKA_STREAMS_EOS_V1 = "kafka_streams_eos_v1"
    #: Flink's KafkaSink with ``DeliveryGuarantee.EXACTLY_ONCE`` (connector 3.x and later, both naming strategies).
    FLINK_KAFKA_SINK = "flink_kafka_sink"


#: How each framework names its transactional ids (txnwatch.core.frameworks reads them; docs/frameworks.md).
FRAMEWORK_NAMES: Final[dict[Framework, str]] = {
    Framework.KAFKA_STREAMS_EOS_V2: "Kafka Streams `exactly_once_v2`: `<application.id>-<process UUID>-<thread index>`",
    Framework.KAFKA_STREAMS_EOS_V1: "Kafka Streams `exactly_once` (before Kafka 4.0): "
                                    "`<application.id>-<topicGroupId>_<partition>`",
    Framework.FLINK_KAFKA_SINK: "Flink KafkaSink, `EXACTLY_ONCE`: `<transactionalIdPrefix>-<subtask>-<checkpoint id>` "
                                "(INCREMENTING naming) or `-<pool slot>` (POOLING, connector 4.x+)",
}


class LingeringReason(StrEnum):
    """Why an open Flink sink transaction is left behind (label ``reason`` of the lingering series)."""

    #: A newer checkpoint of the same sink subtask committed after this transaction began: Flink moved on.
    SUPERSEDED = "superseded"
    #: Past its own transaction.timeout.ms and nothing of the sink's prefix has been open or committed since.
    JOB_GONE = "job_gone"


LINGERING_REASONS: Final[dict[LingeringReason, Term]] = {
    LingeringReason.SUPERSEDED: Term(
        "superseded", "A newer checkpoint of the sink committed",
        "Flink commits a sink subtask's transactions in checkpoint order, so one still Ongoing after a newer "
        "checkpoint of the same prefix and subtask committed will never be committed: it pins the LSO of its "
        "partitions until its transaction.timeout.ms (FLINK-40626).",
        "Abort it by transactional id (txnwatch abort --transactional-id, Kafka 4.1+)."),
    LingeringReason.JOB_GONE: Term(
        "job_gone", "The sink's job is gone",
        "The transaction is past its own transaction.timeout.ms and no transaction of the sink's prefix has "
        "been open or committed since it began: the job that owned it is not running.",
        "Abort it by transactional id (txnwatch abort --transactional-id, Kafka 4.1+); check the coordinator, "
        "which should have aborted it at its timeout."),
}


class KnownHazard(StrEnum):
    """A Kafka transaction bug a cluster's release and finalized transaction.version expose it to (label ``hazard``,
    API field ``known_hazards``); txnwatch.core.hazards says which apply."""

    #: Brokers 4.0-4.2.x with transaction.version 2 write no Previous/NextProducerId to __transaction_state.
    KAFKA_20310 = "kafka_20310"
    #: A TV2 id near epoch 32,767 can get stuck Ongoing on releases without the fix.
    KAFKA_20090 = "kafka_20090"


@dataclass(frozen=True, slots=True)
class HazardTerm:
    """One known hazard: what it is, which releases carry it (and the evidence for that), what to do."""

    name: str
    title: str
    explanation: str
    affected: str
    fix: str


HAZARDS: Final[dict[KnownHazard, HazardTerm]] = {
    KnownHazard.KAFKA_20310: HazardTerm(
        "kafka_20310", "Producer-id rotation can fence after a coordinator failover (KAFKA-20310)",
        "With transaction.version 2 these brokers write no PreviousProducerId/NextProducerId to "
        "__transaction_state, so when an id's epoch is exhausted and its producer id rotates, a coordinator that "
        "loads the id after a failover does not know the rotation and can fence the id's producer.",
        "brokers 4.0 to 4.2.x with transaction.version 2 finalized",
        "Upgrade the brokers past 4.2; meanwhile watch the ids nearest epoch exhaustion (epoch headroom) and "
        "avoid coordinator failovers while one rotates."),
    KnownHazard.KAFKA_20090: HazardTerm(
        "kafka_20090", "An id near epoch 32,767 can get stuck Ongoing (KAFKA-20090)",
        "With transaction.version 2, a transaction that times out at epoch 32,766 is fenced to 32,767 and, if a "
        "late EndTxn(ABORT) arrives, its producer id is not rotated: the id can stay Ongoing, pinning the LSO of "
        "its partitions.",
        "releases before 4.4.0 with transaction.version 2 finalized (the fix, apache/kafka#21469 and #21506, was "
        "merged in February 2026; it is in 4.4.0's transaction coordinator and not in 4.1.1's; whether a 4.2.x or "
        "4.3.x release carries a backport is not established, so those lines are flagged too)",
        "Upgrade the brokers to 4.4.0 or newer; an id that is stuck is ended with the abort by transactional id "
        "(4.1+) or the partition abort."),
}


def runbook_link(rule: str) -> str:
    """The runbook section of a built-in rule (or of a Prometheus alert name); the whole doc if unknown."""
    alert = BY_RULE.get(rule) or BY_PROMETHEUS.get(rule)
    return alert.runbook if alert else RUNBOOK_DOC


def markdown() -> str:
    """The vocabulary as docs/metrics.md shows it (between its ``vocabulary`` markers; a test keeps it current)."""
    def names(states: frozenset[TxnState]) -> str:
        return ", ".join(state.value for state in TxnState if state in states)

    lines = ["### Transaction states (label `state`, API field `state`)", "",
             "| state | open | valid previous states (Kafka's `validPreviousStates`) |", "|---|---|---|"]
    lines += [f"| `{s.value}` | {'yes' if s.is_open else 'no'} | {names(VALID_PREVIOUS.get(s, frozenset())) or '—'} |"
              for s in TxnState]
    lines += ["", "### Transition events (API field `events`, event counters)", "",
              "| event | meaning |", "|---|---|"]
    lines += [f"| `{e.value}` | {meaning} |" for e, meaning in EVENTS.items()]
    lines += ["", "### Hanging reasons (label `reason`, API field `reason`)", "",
             "| reason | meaning | fix |", "|---|---|---|"]
    lines += [f"| `{r.value}` | {t.explanation} | {t.fix} |" for r, t in REASONS.items()]
    lines += ["", "### Frameworks (label `framework`, API field `framework.framework`)", "",
              "| framework | what names the ids |", "|---|---|"]
    lines += [f"| `{f.value}` | {FRAMEWORK_NAMES[f]} |" for f in Framework]
    lines += ["", "### Lingering reasons (label `reason` of txnwatch_flink_lingering_*, API field `reason`)", "",
              "| reason | meaning | fix |", "|---|---|---|"]
    lines += [f"| `{r.value}` | {t.explanation} | {t.fix} |" for r, t in LINGERING_REASONS.items()]
    lines += ["", "### Known hazards (label `hazard`, API field `known_hazards`)", "",
              "| hazard | what | affected releases |", "|---|---|---|"]
    lines += [f"| `{h.value}` | {t.explanation} | {t.affected} |" for h, t in HAZARDS.items()]
    lines += ["", "### Alerts", "",
              "| built-in rule | Prometheus alert | PagerDuty severity | route | meaning |", "|---|---|---|---|---|"]
    lines += [f"| {f'`{a.rule}`' if a.rule else '—'} | [`{a.prometheus}`](runbooks.md#{a.anchor}) | "
              f"{a.severity.value} | {a.route.value} | {a.explanation} |" for a in ALERTS]
    return "\n".join(lines) + "\n"
