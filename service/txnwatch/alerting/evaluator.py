"""Alert state machine: pending → firing after ``for`` → resolved when the condition is gone.

All state lives in the ``alerts`` table and notifications go into the outbox in the
same transaction as the state change, so a crash can lose neither half of it: a
restart sees "firing" together with its queued trigger, or neither.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from txnwatch.alerting.conditions import CLUSTER_DOWN, Condition
from txnwatch.alerting.grouping import GROUP_DETAIL, ActiveIncident, fold, root_cause
from txnwatch.alerting.outbox import PAGERDUTY, enqueue
from txnwatch.alerting.rules import effective_rules, rule_for
from txnwatch.core.config import AlertRuleConfig
from txnwatch.store import models as m

log = logging.getLogger(__name__)

PENDING, FIRING, RESOLVED = "pending", "firing", "resolved"
ACTIVE = (PENDING, FIRING)


@dataclass
class EvaluationResult:
    """Incident keys per transition, for logs and tests."""

    pending: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    resolved: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    retitled: list[str] = field(default_factory=list)  # firing incidents whose root cause changed (an update sent)


def evaluate(session: Session, cluster: str, conditions: Iterable[Condition], now: datetime,
             rules: Mapping[str, AlertRuleConfig], *, channels: Sequence[str] = (PAGERDUTY,),
             max_gap_seconds: float | None = None) -> EvaluationResult:
    """Apply one poll's complete set of active conditions for ``cluster``; the caller commits.

    While ``cluster_down`` holds, the other alerts of the cluster are left exactly as
    they are: a failed poll says nothing about them, and resolving every open page
    whenever a broker blips would be worse than waiting.  ``rules`` may be the raw
    ``Settings.alert_rules``; they are merged over the defaults here.

    ``max_gap_seconds``: a pending alert not seen for longer (txnwatch was down, or
    another replica led) restarts its ``for`` clock, since nobody watched it hold.
    """
    rules = effective_rules(rules)
    conditions = list(conditions)
    for condition in conditions:
        if condition.cluster != cluster:
            raise ValueError(f"condition for cluster {condition.cluster!r} passed to the evaluation of {cluster!r}")
    cluster_id = _cluster_id(session, cluster)
    active = {a.incident_key: a for a in session.scalars(
        select(m.Alert).where(m.Alert.cluster_id == cluster_id, m.Alert.state.in_(ACTIVE)).order_by(m.Alert.id))}
    # One root cause, one incident: a disabled rule's condition is never a group's lead or member.
    groupable = [c for c in conditions if rule_for(rules, c.rule).enabled]
    current: dict[str, Condition] = {c.incident_key: c for c in conditions if not rule_for(rules, c.rule).enabled}
    current.update({c.incident_key: c for c in fold(groupable, _active_groups(active.values()))})
    blind = any(c.rule == CLUSTER_DOWN for c in current.values())
    result = EvaluationResult()

    for key, condition in current.items():
        rule = rule_for(rules, condition.rule)
        alert = active.get(key)
        if not rule.enabled:
            continue  # an active alert of a disabled rule clears below
        if alert is None:
            alert = _open(session, cluster_id, condition, rule, now)
            active[key] = alert
            result.pending.append(key)
        else:
            if alert.state == PENDING and max_gap_seconds is not None and \
                    (now - alert.last_seen_at).total_seconds() > max_gap_seconds:
                alert.started_at = now
            was = root_cause(alert.details, alert.rule)
            _refresh(alert, condition, now)
            if alert.state == FIRING and root_cause(alert.details, alert.rule) != was:
                # The page already out names a cause that turned out to be an effect: PagerDuty appends a
                # trigger with the same dedup key to the open alert (no new incident), with the new summary.
                session.flush()
                for channel in channels:
                    enqueue(session, alert, "trigger", channel, now)
                result.retitled.append(key)
        if alert.state == PENDING and (now - alert.started_at).total_seconds() >= rule.for_seconds:
            alert.state, alert.fired_at, alert.severity = FIRING, now, rule.severity
            session.flush()
            for channel in channels:
                enqueue(session, alert, "trigger", channel, now)
            result.fired.append(key)

    for key, alert in active.items():
        still = current.get(key)
        if still is not None and rule_for(rules, still.rule).enabled:
            continue
        if blind and still is None and alert.rule != CLUSTER_DOWN:
            continue
        if alert.state == PENDING:
            session.delete(alert)
            result.dropped.append(key)
        else:
            alert.state, alert.resolved_at = RESOLVED, now
            for channel in channels:
                enqueue(session, alert, "resolve", channel, now)
            result.resolved.append(key)
    session.flush()
    if result.fired or result.resolved or result.retitled:
        log.info("alerts on %s: fired %s; resolved %s; retitled by their root cause %s", cluster,
                 *(", ".join(keys) or "none" for keys in (result.fired, result.resolved, result.retitled)))
    return result


def _active_groups(alerts: Iterable[m.Alert]) -> dict[str, ActiveIncident]:
    """group -> its open alert, a firing one before a pending one (the page already out keeps its key)."""
    groups: dict[str, ActiveIncident] = {}
    for alert in alerts:
        group = (alert.details or {}).get(GROUP_DETAIL)
        if not isinstance(group, str):
            continue
        known = groups.get(group)
        if known is None or (alert.state == FIRING and not known.firing):
            groups[group] = ActiveIncident(alert.incident_key, alert.rule, alert.state == FIRING)
    return groups


def retire_clusters(session: Session, configured: Iterable[str], now: datetime, *,
                    channels: Sequence[str] = (PAGERDUTY,)) -> list[str]:
    """Resolve the active alerts of clusters no longer configured; nobody would ever evaluate them again.

    Meant for start-up, after the settings are loaded; returns the resolved incident keys.
    """
    rows = session.execute(select(m.Alert, m.Cluster.name).join(m.Cluster, m.Alert.cluster_id == m.Cluster.id)
                           .where(m.Alert.state.in_(ACTIVE), m.Cluster.name.not_in(list(configured)))).all()
    retired = []
    for alert, _name in rows:
        if alert.state == PENDING:
            session.delete(alert)
            continue
        alert.state, alert.resolved_at = RESOLVED, now
        for channel in channels:
            enqueue(session, alert, "resolve", channel, now)
        retired.append(alert.incident_key)
    session.flush()
    if retired:
        log.info("resolved %d alert(s) of clusters no longer configured: %s", len(retired), retired)
    return retired


def _open(session: Session, cluster_id: int, condition: Condition, rule: AlertRuleConfig, now: datetime) -> m.Alert:
    alert = m.Alert(cluster_id=cluster_id, rule=condition.rule, incident_key=condition.incident_key, state=PENDING,
                    severity=rule.severity, summary=condition.summary, labels=_labels(condition, rule),
                    details=_jsonable(condition.details), started_at=now, fired_at=None, resolved_at=None,
                    last_seen_at=now)
    session.add(alert)
    return alert


def _refresh(alert: m.Alert, condition: Condition, now: datetime) -> None:
    """Keep the row current (age, HWM−LSO grow) without touching what was already paged."""
    alert.last_seen_at = now
    alert.summary = condition.summary
    alert.details = _jsonable(condition.details)


def _labels(condition: Condition, rule: AlertRuleConfig) -> dict[str, str]:
    return {**rule.labels, **condition.labels, "cluster": condition.cluster, "rule": condition.rule}


def _jsonable(details: Mapping[str, Any]) -> dict[str, Any]:
    """JSON columns reject datetimes and the like; a detail is for humans, so its text is enough."""
    def fix(value: Any) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, Mapping):
            return {str(k): fix(v) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [fix(v) for v in value]
        if isinstance(value, datetime):
            return value.isoformat()
        return str(value)
    fixed: dict[str, Any] = fix(dict(details))
    return fixed


class UnregisteredCluster(LookupError):
    """Alerts belong to a cluster row; rows are created only by the store's registration at start."""


def _cluster_id(session: Session, name: str) -> int:
    found = session.scalar(select(m.Cluster.id).where(m.Cluster.name == name))
    if found is None:
        raise UnregisteredCluster(f"cluster {name!r} has no row yet: the store registers configured clusters at start "
                                  "(txnwatch.store.clusters.register_clusters)")
    return found
