"""The alert evaluator's edge: open alerts out of their rows, into the state machine, and its changes back.

The transitions themselves are pure (alerting/machine.py); this module only loads the
cluster's pending and firing rows, hands them to :func:`machine.advance` and applies the
:class:`~txnwatch.alerting.machine.Step` it returns.  All state lives in the ``alerts``
table and notifications go into the outbox in the same transaction as the state change,
so a crash can lose neither half of it: a restart sees "firing" together with its queued
trigger, or neither, and the next poll continues from the rows as if nothing happened.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from txnwatch.alerting import machine
from txnwatch.alerting.conditions import Condition
from txnwatch.alerting.machine import (
    DROPPED,
    FIRED,
    FIRING,
    OPENED,
    PENDING,
    RESOLVED,
    RETITLED,
    OpenAlert,
    State,
    Step,
)
from txnwatch.alerting.outbox import PAGERDUTY, Action, enqueue
from txnwatch.alerting.rules import effective_rules
from txnwatch.core.config import AlertRuleConfig
from txnwatch.store import models as m

log = logging.getLogger(__name__)

ACTIVE = (PENDING, FIRING)
#: The notification each change queues (opened and dropped alerts paged nothing).
NOTICES: dict[str, Action] = {FIRED: "trigger", RETITLED: "trigger", RESOLVED: "resolve"}


@dataclass
class EvaluationResult:
    """Incident keys per transition, for logs and tests."""

    pending: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    retitled: list[str] = field(default_factory=list)  # firing incidents whose root cause changed (an update sent)

    @classmethod
    def of(cls, step: Step) -> EvaluationResult:
        return cls(step.keys(OPENED), step.keys(FIRED), step.keys(RESOLVED), step.keys(DROPPED), step.keys(RETITLED))


def evaluate(session: Session, cluster: str, conditions: Iterable[Condition], now: datetime,
             rules: Mapping[str, AlertRuleConfig], *, channels: Sequence[str] = (PAGERDUTY,),
             max_gap_seconds: float | None = None) -> EvaluationResult:
    """Apply one poll's complete set of active conditions for ``cluster``; the caller commits.

    ``rules`` may be the raw ``Settings.alert_rules``; they are merged over the defaults here.
    ``max_gap_seconds``: see :func:`machine.advance` (a pending alert nobody watched restarts its ``for:``).
    """
    conditions = list(conditions)
    for condition in conditions:
        if condition.cluster != cluster:
            raise ValueError(f"condition for cluster {condition.cluster!r} passed to the evaluation of {cluster!r}")
    cluster_id = _cluster_id(session, cluster)
    rows = {a.incident_key: a for a in session.scalars(
        select(m.Alert).where(m.Alert.cluster_id == cluster_id, m.Alert.state.in_(ACTIVE)).order_by(m.Alert.id))}
    step = machine.advance({key: _open_alert(row) for key, row in rows.items()}, conditions, now,
                           effective_rules(rules), max_gap_seconds=max_gap_seconds)
    _apply(session, cluster_id, rows, step, now, channels)
    result = EvaluationResult.of(step)
    if result.fired or result.resolved or result.retitled:
        log.info("alerts on %s: fired %s; resolved %s; retitled by their root cause %s", cluster,
                 *(", ".join(keys) or "none" for keys in (result.fired, result.resolved, result.retitled)))
    return result


def retire_clusters(session: Session, configured: Iterable[str], now: datetime, *,
                    channels: Sequence[str] = (PAGERDUTY,)) -> list[str]:
    """Resolve the active alerts of clusters no longer configured; nobody would ever evaluate them again.

    Meant for start-up, after the settings are loaded; returns the resolved incident keys.
    """
    rows = {alert.incident_key: alert for alert in session.scalars(
        select(m.Alert).join(m.Cluster, m.Alert.cluster_id == m.Cluster.id)
        .where(m.Alert.state.in_(ACTIVE), m.Cluster.name.not_in(list(configured))))}
    step = machine.retire({key: _open_alert(row) for key, row in rows.items()})
    _apply(session, None, rows, step, now, channels)
    retired = step.keys(RESOLVED)
    if retired:
        log.info("resolved %d alert(s) of clusters no longer configured: %s", len(retired), retired)
    return retired


def _apply(session: Session, cluster_id: int | None, rows: dict[str, m.Alert], step: Step, now: datetime,
           channels: Sequence[str]) -> None:
    """The step's rows first (new ones inserted in the order they opened), then its notifications, in order.

    Each alert has at most one notification per step, so every event's payload is its row as the step left it.
    """
    for key, alert in step.active.items():
        row = rows.get(key)
        if row is None:
            row = rows[key] = m.Alert(cluster_id=cluster_id, resolved_at=None)
            session.add(row)
        _write(row, alert)
    for change in step.changes:
        row = rows[change.incident_key]
        if change.kind == DROPPED:
            session.delete(row)
        elif change.kind == RESOLVED:
            row.state, row.resolved_at = RESOLVED, now
    session.flush()  # new rows get their ids, which the outbox events name
    for change in step.changes:
        action = NOTICES.get(change.kind)
        if action is None:
            continue
        for channel in channels:
            enqueue(session, rows[change.incident_key], action, channel, now)
    session.flush()


def _open_alert(row: m.Alert) -> OpenAlert:
    state: State = FIRING if row.state == FIRING else PENDING
    return OpenAlert(rule=row.rule, incident_key=row.incident_key, state=state, severity=row.severity,
                     summary=row.summary, labels=row.labels or {}, details=row.details or {},
                     started_at=row.started_at, last_seen_at=row.last_seen_at, fired_at=row.fired_at)


def _write(row: m.Alert, alert: OpenAlert) -> None:
    """Only the fields that changed, so an alert that merely holds costs an UPDATE of what moved."""
    for name in ("rule", "incident_key", "state", "severity", "summary", "labels", "details", "started_at",
                 "last_seen_at", "fired_at"):
        value = getattr(alert, name)
        if getattr(row, name, None) != value:
            setattr(row, name, value)


class UnregisteredCluster(LookupError):
    """Alerts belong to a cluster row; rows are created only by the store's registration at start."""


def _cluster_id(session: Session, name: str) -> int:
    found = session.scalar(select(m.Cluster.id).where(m.Cluster.name == name))
    if found is None:
        raise UnregisteredCluster(f"cluster {name!r} has no row yet: the store registers configured clusters at start "
                                  "(txnwatch.store.clusters.register_clusters)")
    return found
