"""From one poll's findings to the complete set of alert conditions for its cluster.

The evaluator treats a missing condition as cleared, so this is where "we could not
tell" must not turn into "all clear": a hanging incident whose coordinator did not
answer this time is carried over unchanged until a poll can decide it again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from txnwatch.alerting.conditions import (
    FLINK_LINGERING_TRANSACTION,
    HANGING_TRANSACTION,
    LSO_STALL,
    PREPARE_STUCK,
    TRANSACTION_TIMEOUT_EXCEEDED,
    VERIFICATION_FAILURE_RATE,
    Condition,
    abort_at_offset_command,
    abort_command,
    cannot_commit,
    cluster_down,
    cluster_incident_key,
    partition_incident_key,
    partition_stall_key,
    producer_group,
    runbook_link,
    transaction_incident_key,
)
from txnwatch.core import commands
from txnwatch.core.epoch import from_ms
from txnwatch.core.findings import (
    Findings,
    HangingTransaction,
    LingeringTransaction,
    LsoStall,
    OverdueTransaction,
    StuckPrepare,
    VerificationCheck,
)
from txnwatch.core.model import ClusterSnapshot
from txnwatch.core.vocabulary import LINGERING_REASONS, LingeringReason
from txnwatch.store import models as m

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from sqlalchemy.orm import Session, sessionmaker

    from txnwatch.alerting.service import Alerting
    from txnwatch.core.canary import CanaryFailure
    from txnwatch.core.config import AlertRuleConfig


def _age(ms: int) -> str:
    return f"{ms / 60_000:.1f} min" if ms >= 120_000 else f"{ms / 1000:.0f} s"


def _at(ms: int) -> str:
    """A moment, not a duration: a summary that says "since 02:41:07 UTC" is still true when read later (a page
    that said "for 50 s" is wrong a minute on), and it is the same moment the console and the API show."""
    return from_ms(ms).strftime("%H:%M:%S UTC")


def _iso(ms: int) -> str:
    return from_ms(ms).isoformat()


class ConditionBuilder:
    """One per cluster; remembers only the hanging conditions it may have to carry over."""

    def __init__(self, cluster: str, bootstrap: str, verification_failure_ratio: float = 0.0,
                 canary: Callable[[], CanaryFailure | None] | None = None) -> None:
        self.cluster = cluster
        #: The cluster's canary finding ("transactions cannot commit"), as its canary holds it now.
        self.canary = canary
        self.bootstrap = bootstrap
        self.verification_failure_ratio = verification_failure_ratio
        self._hanging: dict[tuple[str, int, int], Condition] = {}
        self._down_since_ms: int | None = None
        self._verification_holds = False

    def build(self, findings: Findings | None, error: str | None, now_ms: int) -> list[Condition]:
        if findings is None:
            if error is None:  # detection failed: decide nothing it decides
                return list(self._hanging.values()) + self._canary()
            self._down_since_ms = self._down_since_ms or now_ms
            return [cluster_down(self.cluster, error, (now_ms - self._down_since_ms) / 1000)]
        self._down_since_ms = None
        conditions = self._hanging_conditions(findings)
        conditions += [self._overdue(o) for o in findings.overdue]
        conditions += [self._stuck(s) for s in findings.stuck_prepare]
        conditions += [self._stall(s) for s in findings.lso_stalls]
        conditions += [self._lingering(t) for t in findings.lingering]
        conditions = [self._grouped(c) for c in conditions]
        verification = self._verification(findings.verification)
        return conditions + ([verification] if verification is not None else []) + self._canary()

    def _canary(self) -> list[Condition]:
        """The canary runs on its own thread and clock; its finding joins whichever poll comes next."""
        failure = self.canary() if self.canary is not None else None
        return [] if failure is None else [cannot_commit(self.cluster, failure, _iso(failure.since_ms))]

    def _verification(self, check: VerificationCheck) -> Condition | None:
        """Holds from the poll whose failure share passes the threshold for as long as any pair still fails, so
        the share moving with the traffic (1 of 3, 1 of 6 open transactions) neither drops the pending alert,
        restarting its ``for:``, nor rewrites its text: the summary names the failing transactions instead."""
        above = bool(check.checks) and check.failures / check.checks > self.verification_failure_ratio
        self._verification_holds = above or (self._verification_holds and bool(check.failing))
        if not self._verification_holds:
            return None
        named = [f"{tp} (producer {pid}, {f'transactional id {txn}' if txn else 'no transactional id'})"
                 for tp, pid, txn in check.failing]
        shown = ", ".join(named[:3]) + (f" and {len(named) - 3} more" if len(named) > 3 else "")
        return Condition(
            VERIFICATION_FAILURE_RATE, cluster_incident_key(VERIFICATION_FAILURE_RATE, self.cluster), self.cluster,
            f"[{self.cluster}] open transactions on partitions their coordinator does not list: {shown or 'none now'}",
            {"cluster": self.cluster},
            {"failures": check.failures, "checks": check.checks, "runbook": runbook_link(VERIFICATION_FAILURE_RATE),
             "failing": [{"topic": tp.topic, "partition": tp.partition, "producer_id": pid, "transactional_id": txn}
                         for tp, pid, txn in check.failing],
             "suggested_action": "Look for hanging transactions (GET /api/v1/hanging) and producers writing "
                                 "without AddPartitionsToTxn (pre-KIP-890 clients)."})

    def _grouped(self, condition: Condition) -> Condition:
        """Findings about one producer id are one root cause (alerting/grouping.py folds them into one incident)."""
        details = condition.details
        producer_id = details.get("blocking_producer_id") if condition.rule == LSO_STALL else details.get("producer_id")
        if not isinstance(producer_id, int) or producer_id < 0:
            return condition
        return replace(condition, group=producer_group(self.cluster, producer_id))

    def _hanging_conditions(self, findings: Findings) -> list[Condition]:
        current = {(str(h.tp.topic), h.tp.partition, h.producer_id): self._hanging_condition(h) for h in findings.hanging}
        for u in findings.undetermined:
            key = (u.tp.topic, u.tp.partition, u.producer_id)
            if key not in current and key in self._hanging:
                current[key] = self._hanging[key]
        self._hanging = current
        return list(current.values())

    def _hanging_condition(self, h: HangingTransaction) -> Condition:
        txn = h.transactional_id or "unknown to its coordinator"
        action = (abort_command(self.bootstrap, h.tp.topic, h.tp.partition, h.producer_id, h.producer_epoch,
                                max(0, h.coordinator_epoch))
                  if h.coordinator_epoch >= 0 else
                  abort_at_offset_command(self.bootstrap, h.tp.topic, h.tp.partition, h.txn_start_offset))
        return Condition(
            HANGING_TRANSACTION,
            partition_incident_key(HANGING_TRANSACTION, self.cluster, h.tp.topic, h.tp.partition, h.producer_id),
            self.cluster,
            f"[{self.cluster}] hanging transaction on {h.tp} (producer {h.producer_id} epoch {h.producer_epoch}, "
            f"transactional id {txn}), last write at {_at(h.last_timestamp_ms)}",
            {"cluster": self.cluster, "topic": h.tp.topic, "partition": str(h.tp.partition)},
            {"transactional_id": h.transactional_id, "producer_id": h.producer_id, "producer_epoch": h.producer_epoch,
             "coordinator_epoch": h.coordinator_epoch, "coordinator_id": h.coordinator_id, "reason": h.reason.value,
             "txn_start_offset": h.txn_start_offset, "age_seconds": round(h.age_ms / 1000),
             "since": _iso(h.last_timestamp_ms),  # open at least since its last write (first write: not known here)
             "runbook": runbook_link(HANGING_TRANSACTION), "suggested_action": action})

    def _overdue(self, o: OverdueTransaction) -> Condition:
        return Condition(
            TRANSACTION_TIMEOUT_EXCEEDED,
            transaction_incident_key(TRANSACTION_TIMEOUT_EXCEEDED, self.cluster, o.transactional_id, o.producer_id),
            self.cluster,
            f"[{self.cluster}] transaction {o.transactional_id} open for {_age(o.age_ms)}, past its "
            f"transaction.timeout.ms of {o.timeout_ms / 1000:.0f} s",
            {"cluster": self.cluster},
            {"transactional_id": o.transactional_id, "producer_id": o.producer_id, "producer_epoch": o.producer_epoch,
             "age_seconds": round(o.age_ms / 1000), "timeout_ms": o.timeout_ms,
             "partitions": sorted(str(tp) for tp in o.partitions), "runbook": runbook_link(TRANSACTION_TIMEOUT_EXCEEDED),
             "suggested_action": "The coordinator should have aborted it: check the coordinator broker's health "
                                 "and `kafka-transactions.sh describe --transactional-id` for its state."})

    def _stuck(self, s: StuckPrepare) -> Condition:
        return Condition(
            PREPARE_STUCK,
            transaction_incident_key(PREPARE_STUCK, self.cluster, s.transactional_id, s.producer_id),
            self.cluster,
            f"[{self.cluster}] transaction {s.transactional_id} stuck in {s.state.value} for {_age(s.duration_ms)}",
            {"cluster": self.cluster},
            {"transactional_id": s.transactional_id, "state": s.state.value, "producer_id": s.producer_id,
             "producer_epoch": s.producer_epoch, "duration_seconds": round(s.duration_ms / 1000),
             "partitions": sorted(str(tp) for tp in s.partitions), "runbook": runbook_link(PREPARE_STUCK),
             "suggested_action": "Markers cannot be written: check the leaders of the listed partitions "
                                 "(offline, frozen or under-replicated brokers)."})

    def _lingering(self, t: LingeringTransaction) -> Condition:
        """One per lingering transaction, grouped with the LSO stalls and timeout it causes (same producer id)."""
        why = (f"superseded by checkpoint {t.superseded_checkpoint:,} ({t.superseded_by}, committed)"
               if t.reason is LingeringReason.SUPERSEDED else "its job is gone (past its timeout)")
        return Condition(
            FLINK_LINGERING_TRANSACTION,
            transaction_incident_key(FLINK_LINGERING_TRANSACTION, self.cluster, t.transactional_id, t.producer_id),
            self.cluster,
            f"[{self.cluster}] Flink sink {t.prefix} subtask {t.subtask} checkpoint {t.checkpoint:,}: transaction "
            f"{t.transactional_id} open since {_at(t.start_time_ms)}, {why}",
            {"cluster": self.cluster},
            {"transactional_id": t.transactional_id, "producer_id": t.producer_id, "producer_epoch": t.producer_epoch,
             "prefix": t.prefix, "subtask": t.subtask, "checkpoint": t.checkpoint, "reason": t.reason.value,
             "superseded_by": t.superseded_by, "age_seconds": round(t.age_ms / 1000), "timeout_ms": t.timeout_ms,
             "since": _iso(t.start_time_ms), "partitions": sorted(str(tp) for tp in t.partitions),
             "runbook": runbook_link(FLINK_LINGERING_TRANSACTION),
             "suggested_action": f"{LINGERING_REASONS[t.reason].fix} "
                                 f"{commands.abort_by_id_line(commands.PROGRAM, self.bootstrap, t.transactional_id)}"})

    def _stall(self, s: LsoStall) -> Condition:
        blocker = (f"producer {s.blocking_producer_id} epoch {s.blocking_producer_epoch}"
                   + (f" ({s.blocking_transactional_id})" if s.blocking_transactional_id else "")
                   if s.blocking_producer_id is not None else "an unknown producer")
        return Condition(
            LSO_STALL, partition_stall_key(LSO_STALL, self.cluster, s.tp.topic, s.tp.partition), self.cluster,
            f"[{self.cluster}] LSO of {s.tp} stuck at {s.stalled_lso} since {_at(s.started_ms)}, "
            f"{s.gap:,} records invisible to read_committed consumers, blocked by {blocker}",
            {"cluster": self.cluster, "topic": s.tp.topic, "partition": str(s.tp.partition)},
            {"stalled_lso": s.stalled_lso, "hwm_minus_lso": s.gap, "max_hwm_minus_lso": s.max_gap,
             "blocking_producer_id": s.blocking_producer_id, "blocking_producer_epoch": s.blocking_producer_epoch,
             "blocking_transactional_id": s.blocking_transactional_id,
             "duration_seconds": round((s.last_seen_ms - s.started_ms) / 1000), "since": _iso(s.started_ms),
             "runbook": runbook_link(LSO_STALL),
             "suggested_action": "Find the blocking producer (GET /api/v1/lso-stalls); if it is gone, the "
                                 "transaction is hanging: abort it (txnwatch abort or kafka-transactions.sh abort, "
                                 "--start-offset the stalled LSO)."})


class AlertSink:
    """The collector's alerting sink: findings → conditions → evaluator; sets the firing gauge per rule."""

    def __init__(self, alerting: Alerting, builders: dict[str, ConditionBuilder],
                 sessions: sessionmaker[Session], rules: Mapping[str, AlertRuleConfig]) -> None:
        self._alerting = alerting
        self._rules = rules
        self._builders = builders
        self._sessions = sessions

    def on_poll(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None, now_ms: int) -> None:
        conditions = self._builders[cluster].build(findings, error, now_ms)
        now = from_ms(now_ms)
        self._alerting.evaluate(cluster, conditions, now)  # logs what fired and resolved
        self._publish(cluster)

    def on_still_down(self, cluster: str, error: str, now_ms: int) -> None:
        """The collector is backing off a down cluster: ``cluster_down`` still holds, its ``for:`` runs on."""
        self.on_poll(cluster, None, None, error, now_ms)

    def _publish(self, cluster: str) -> None:
        with self._sessions() as session:
            firing = session.execute(
                select(m.Alert.rule, m.Alert.severity, func.count())
                .join(m.Cluster, m.Cluster.id == m.Alert.cluster_id)
                .where(m.Cluster.name == cluster, m.Alert.state == "firing")
                .group_by(m.Alert.rule, m.Alert.severity)).all()
        counts = {(rule, str(cfg.severity)): 0 for rule, cfg in self._rules.items() if cfg.enabled}
        counts.update({(rule, severity): n for rule, severity, n in firing})
        self._alerting.metrics.firing(cluster, counts)
