"""The one list of words txnwatch uses for what goes wrong: hanging reasons, alerts and their severities.

Code (detection, alerting), the API schema (enums), docs/metrics.md (a generated
section, checked by a test), the Prometheus rules, the dashboards and the console all
take these from here, so a reason or an alert cannot be spelled two ways or documented
without existing.  Pure data: importing it costs nothing and touches no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final

RUNBOOK_DOC: Final = "docs/runbooks.md"

# Built-in alert rules (config ``alert_rules``, PagerDuty details, the API's ``rule``).
HANGING_TRANSACTION: Final = "hanging_transaction"
TRANSACTION_TIMEOUT_EXCEEDED: Final = "transaction_timeout_exceeded"
PREPARE_STUCK: Final = "prepare_stuck"
LSO_STALL: Final = "lso_stall"
VERIFICATION_FAILURE_RATE: Final = "verification_failure_rate"
CLUSTER_DOWN: Final = "cluster_down"


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
class Alert:
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


ALERTS: Final[tuple[Alert, ...]] = (
    Alert(HANGING_TRANSACTION, "KafkaHangingTransaction", Severity.CRITICAL, Route.PAGE, 60,
          "Hanging transaction",
          "A partition holds an open transaction nothing will finish; read_committed consumers of it are stuck."),
    Alert(TRANSACTION_TIMEOUT_EXCEEDED, "KafkaTransactionPastTimeout", Severity.ERROR, Route.PAGE, 60,
          "Transaction past its timeout",
          "The coordinator should have aborted this transaction by now; its partitions' LSOs are pinned."),
    Alert(PREPARE_STUCK, "KafkaTransactionStuckInPrepare", Severity.CRITICAL, Route.PAGE, 60,
          "Transaction stuck in Prepare",
          "Commit or abort is decided but the markers are not written: a partition leader is unavailable."),
    Alert(LSO_STALL, "KafkaLSOStalled", Severity.CRITICAL, Route.PAGE, 120,
          "LSO stalled",
          "The last stable offset stands still while producers write: read_committed consumers see nothing new."),
    Alert(VERIFICATION_FAILURE_RATE, "KafkaTransactionVerificationFailures", Severity.WARNING, Route.TICKET, 300,
          "Verification failures",
          "Partitions hold open transactions their coordinators do not list: the precursor of hanging ones."),
    Alert(CLUSTER_DOWN, "TxnwatchClusterUnreachable", Severity.CRITICAL, Route.PAGE, 120,
          "Kafka cluster unreachable",
          "txnwatch reaches no broker of the cluster; its transaction alerts are on hold meanwhile."),
    Alert(None, "KafkaTransactionVerificationSlow", Severity.WARNING, Route.TICKET, 0,
          "Verification slow",
          "Coordinators take long to list partitions producers already wrote to (p99 above 30 s)."),
    Alert(None, "TxnwatchDown", Severity.CRITICAL, Route.PAGE, 0,
          "txnwatch down", "Prometheus cannot scrape txnwatch: nothing watches the transactions."),
    Alert(None, "TxnwatchDatabaseDown", Severity.WARNING, Route.TICKET, 0,
          "txnwatch database down", "History is buffered in memory and the API serves stale data."),
    Alert(None, "TxnwatchOutboxStuck", Severity.WARNING, Route.TICKET, 0,
          "PagerDuty outbox stuck", "Built-in pages are not reaching PagerDuty."),
)

BY_RULE: Final[dict[str, Alert]] = {a.rule: a for a in ALERTS if a.rule is not None}
BY_PROMETHEUS: Final[dict[str, Alert]] = {a.prometheus: a for a in ALERTS}
RULES: Final[tuple[str, ...]] = tuple(BY_RULE)


def runbook_link(rule: str) -> str:
    """The runbook section of a built-in rule (or of a Prometheus alert name); the whole doc if unknown."""
    alert = BY_RULE.get(rule) or BY_PROMETHEUS.get(rule)
    return alert.runbook if alert else RUNBOOK_DOC


def markdown() -> str:
    """The vocabulary as docs/metrics.md shows it (between its ``vocabulary`` markers; a test keeps it current)."""
    lines = ["### Hanging reasons (label `reason`, API field `reason`)", "",
             "| reason | meaning | fix |", "|---|---|---|"]
    lines += [f"| `{r.value}` | {t.explanation} | {t.fix} |" for r, t in REASONS.items()]
    lines += ["", "### Alerts", "",
              "| built-in rule | Prometheus alert | PagerDuty severity | route | meaning |", "|---|---|---|---|---|"]
    lines += [f"| {f'`{a.rule}`' if a.rule else '—'} | [`{a.prometheus}`](runbooks.md#{a.anchor}) | "
              f"{a.severity.value} | {a.route.value} | {a.explanation} |" for a in ALERTS]
    return "\n".join(lines) + "\n"
