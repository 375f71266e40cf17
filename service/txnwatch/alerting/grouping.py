"""One root cause, one page: conditions of one group fold into a single incident.

A hanging transaction pins the LSO of its partition, so the same producer shows up as
``hanging_transaction`` on each partition it wrote, as the blocker of an ``lso_stall`` there,
and often as ``transaction_timeout_exceeded`` or ``prepare_stuck`` at its coordinator.  The
condition builder gives all of them the producer's group (:func:`conditions.producer_group`);
here the group becomes one condition: the *lead*, with the others riding along in its
``details["related"]``.

The lead must not change once the incident has paged, or PagerDuty would see a resolve and a
new trigger for the same cause.  So a *firing* alert of the group (its group is stored in the
alert's details) keeps the lead's incident key and rule, even when a more severe finding
joins later (the LSO stall is usually seen minutes before Kafka calls the transaction
hanging) or the lead's own finding is gone for a poll (after a restart, before the stall is
timed again).  A group whose alert is still pending has paged nothing, so it picks the most
severe member afresh: otherwise a hanging transaction (``for: 0``) would wait out the
``for:`` of the LSO stall it joined, and the page would come late.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from txnwatch.alerting.conditions import (
    HANGING_TRANSACTION,
    LSO_STALL,
    PREPARE_STUCK,
    TRANSACTION_TIMEOUT_EXCEEDED,
    Condition,
)

GROUP_DETAIL: Final = "incident_group"
# Most telling first: the root cause, then what it causes.
PRECEDENCE: Final[dict[str, int]] = {HANGING_TRANSACTION: 0, PREPARE_STUCK: 1, TRANSACTION_TIMEOUT_EXCEEDED: 2,
                                     LSO_STALL: 3}


@dataclass(frozen=True)
class ActiveIncident:
    """What the evaluator knows of an open alert that belongs to a group."""

    incident_key: str
    rule: str
    firing: bool


def fold(conditions: Iterable[Condition], active: Mapping[str, ActiveIncident]) -> list[Condition]:
    """Conditions with one condition per group; ``active`` maps group -> its open alert (firing preferred)."""
    out: list[Condition] = []
    groups: dict[str, list[Condition]] = {}
    for condition in conditions:
        if condition.group is None:
            out.append(condition)
        else:
            groups.setdefault(condition.group, []).append(condition)
    for group, members in sorted(groups.items()):
        members.sort(key=lambda c: (PRECEDENCE.get(c.rule, 99), c.incident_key))
        incident = active.get(group)
        if incident is not None and incident.firing:
            lead_key, lead_rule = incident.incident_key, incident.rule
            base = next((m for m in members if m.incident_key == lead_key), members[0])
        else:
            base = members[0]
            lead_key, lead_rule = base.incident_key, base.rule
        related = [_related(m) for m in members if m.incident_key != lead_key]
        summary = base.summary + (f" (+{len(related)} related: {', '.join(sorted({r['rule'] for r in related}))})"
                                  if related else "")
        details: dict[str, Any] = {**base.details, GROUP_DETAIL: group, "related": related}
        out.append(replace(base, rule=lead_rule, incident_key=lead_key, summary=summary, details=details))
    return out


def _related(condition: Condition) -> dict[str, Any]:
    return {"rule": condition.rule, "incident_key": condition.incident_key, "summary": condition.summary,
            "details": dict(condition.details)}
