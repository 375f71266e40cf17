"""The alert state machine, pure: (open alerts, this poll's conditions, now, rules) → (open alerts, changes).

An alert is *pending* from the first poll its condition holds, *firing* once it has held
for its rule's ``for:``, and leaves the open set when the condition is gone: a pending
alert is dropped (it paged nothing), a firing one is resolved (its page is resolved).
Nothing here reads a clock, a database or a network: the evaluator (alerting/evaluator.py)
loads the open alerts from their rows, hands them here with ``now`` and applies the
result (rows and outbox events) in one transaction.  tests/alerting/test_evaluator_table.py
is the numbered table of every transition.

The rules this machine keeps, each a small function below:

* ``for:`` counts from the alert's ``started_at`` (``>=``: ``for: 0`` fires at first
  sight); a pending alert not seen for longer than ``max_gap_seconds`` starts its clock
  again, since nobody watched it hold (txnwatch was down, or another replica led).
* One root cause, one incident (alerting/grouping.py): the conditions of a group fold
  into one, whose key a *firing* alert keeps; when the folded condition names another
  root cause, the firing alert is *retitled*: a trigger with the same key, the new summary.
* While ``cluster_down`` holds (even with its rule disabled: a failed poll says nothing
  either way), the cluster's other open alerts are frozen, neither refreshed nor cleared.
* A disabled rule never opens an alert, and an open alert of a disabled rule clears.
* The severity is the rule's when the alert opens and when it fires; a firing alert keeps
  the severity it paged with, and its labels never change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, Literal

from txnwatch.alerting.conditions import CLUSTER_DOWN, Condition
from txnwatch.alerting.grouping import GROUP_DETAIL, ActiveIncident, fold, root_cause
from txnwatch.alerting.rules import rule_for
from txnwatch.core.config import AlertRuleConfig

PENDING: Final = "pending"
FIRING: Final = "firing"
State = Literal["pending", "firing"]

#: What a poll can do to one alert; the evaluator applies each (a trigger for FIRED and RETITLED, a
#: resolve for RESOLVED, a deleted row for DROPPED).
OPENED: Final = "opened"
FIRED: Final = "fired"
RETITLED: Final = "retitled"
RESOLVED: Final = "resolved"
DROPPED: Final = "dropped"
Kind = Literal["opened", "fired", "retitled", "resolved", "dropped"]


@dataclass(frozen=True, slots=True)
class OpenAlert:
    """One pending or firing alert: the fields of its row that the machine reads or writes."""

    rule: str  # the rule that keeps its key (a group's lead), not always its root cause
    incident_key: str
    state: State
    severity: str
    summary: str
    labels: Mapping[str, str]
    details: Mapping[str, Any]
    started_at: datetime  # the `for:` clock
    last_seen_at: datetime
    fired_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Change:
    kind: Kind
    incident_key: str


@dataclass(frozen=True, slots=True)
class Step:
    """The open alerts after one poll (opened ones last, in the order they opened) and what changed, in order."""

    active: dict[str, OpenAlert]
    changes: tuple[Change, ...] = ()

    def keys(self, kind: Kind) -> list[str]:
        return [c.incident_key for c in self.changes if c.kind == kind]


def advance(active: Mapping[str, OpenAlert], conditions: Iterable[Condition], now: datetime,
            rules: Mapping[str, AlertRuleConfig], *, max_gap_seconds: float | None = None) -> Step:
    """One poll's complete condition set against the open alerts of its cluster (``rules``: effective ones)."""
    current = incidents(conditions, active.values(), rules)
    blind = any(c.rule == CLUSTER_DOWN for c in current.values())
    after = dict(active)
    changes: list[Change] = []
    for key, condition in current.items():
        rule = rule_for(rules, condition.rule)
        if not rule.enabled:
            continue  # an open alert of a disabled rule clears below
        after[key], kinds = _holds(after.get(key), condition, rule, now, max_gap_seconds)
        changes += (Change(kind, key) for kind in kinds)
    for key, alert in active.items():
        kind = _clears(alert, current.get(key), blind, rules)
        if kind is not None:
            del after[key]
            changes.append(Change(kind, key))
    return Step(after, tuple(changes))


def retire(active: Mapping[str, OpenAlert]) -> Step:
    """Every open alert ends (its cluster is no longer configured): what paged resolves, what did not drops."""
    return Step({}, tuple(Change(_ended(alert), key) for key, alert in active.items()))


def incidents(conditions: Iterable[Condition], active: Iterable[OpenAlert],
              rules: Mapping[str, AlertRuleConfig]) -> dict[str, Condition]:
    """incident key -> the condition that holds for it: the groups folded, one per root cause.

    A disabled rule's condition is kept apart (it clears its own alert) and never leads or joins a group.
    """
    conditions = list(conditions)
    groupable = [c for c in conditions if rule_for(rules, c.rule).enabled]
    current = {c.incident_key: c for c in conditions if not rule_for(rules, c.rule).enabled}
    current.update({c.incident_key: c for c in fold(groupable, _active_groups(active))})
    return current


def _holds(alert: OpenAlert | None, condition: Condition, rule: AlertRuleConfig, now: datetime,
           max_gap_seconds: float | None) -> tuple[OpenAlert, list[Kind]]:
    """The condition holds: open the alert, or refresh it; fire it once its ``for:`` has passed."""
    kinds: list[Kind] = []
    if alert is None:
        alert = _opened(condition, rule, now)
        kinds.append(OPENED)
    else:
        refreshed = _refreshed(alert, condition, now, max_gap_seconds)
        if alert.state == FIRING and _retitled(alert, refreshed):
            kinds.append(RETITLED)
        alert = refreshed
    if alert.state == PENDING and (now - alert.started_at).total_seconds() >= rule.for_seconds:
        alert = replace(alert, state=FIRING, fired_at=now, severity=rule.severity)
        kinds.append(FIRED)
    return alert, kinds


def _clears(alert: OpenAlert, still: Condition | None, blind: bool,
            rules: Mapping[str, AlertRuleConfig]) -> Kind | None:
    """How an open alert ends this poll, or None while its condition holds or the cluster is out of sight."""
    if still is not None and rule_for(rules, still.rule).enabled:
        return None
    if blind and still is None and alert.rule != CLUSTER_DOWN:
        return None  # frozen: a failed poll says nothing about it
    return _ended(alert)


def _ended(alert: OpenAlert) -> Kind:
    return DROPPED if alert.state == PENDING else RESOLVED


def _opened(condition: Condition, rule: AlertRuleConfig, now: datetime) -> OpenAlert:
    labels = {**rule.labels, **condition.labels, "cluster": condition.cluster, "rule": condition.rule}
    return OpenAlert(rule=condition.rule, incident_key=condition.incident_key, state=PENDING, severity=rule.severity,
                     summary=condition.summary, labels=labels, details=jsonable(condition.details), started_at=now,
                     last_seen_at=now)


def _refreshed(alert: OpenAlert, condition: Condition, now: datetime, max_gap_seconds: float | None) -> OpenAlert:
    """Keep the alert current (age, HWM−LSO grow) without touching what was already paged."""
    unwatched = (alert.state == PENDING and max_gap_seconds is not None
                 and (now - alert.last_seen_at).total_seconds() > max_gap_seconds)
    return replace(alert, summary=condition.summary, details=jsonable(condition.details), last_seen_at=now,
                   started_at=now if unwatched else alert.started_at)


def _retitled(before: OpenAlert, after: OpenAlert) -> bool:
    """The page already out names a cause that turned out to be an effect: PagerDuty appends a trigger with the
    same dedup key to the open alert (no new incident), with the new summary."""
    return root_cause(after.details, after.rule) != root_cause(before.details, before.rule)


def _active_groups(alerts: Iterable[OpenAlert]) -> dict[str, ActiveIncident]:
    """group -> its open alert, a firing one before a pending one (the page already out keeps its key)."""
    groups: dict[str, ActiveIncident] = {}
    for alert in alerts:
        group = alert.details.get(GROUP_DETAIL)
        if not isinstance(group, str):
            continue
        known = groups.get(group)
        if known is None or (alert.state == FIRING and not known.firing):
            groups[group] = ActiveIncident(alert.incident_key, alert.rule, alert.state == FIRING)
    return groups


def jsonable(details: Mapping[str, Any]) -> dict[str, Any]:
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
