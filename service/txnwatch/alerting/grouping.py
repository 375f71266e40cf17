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

What the incident *says* follows its root cause, though: the key and rule stay, but the
summary and the details are the most telling member's (``root_cause``), so an incident
that paged as an LSO stall is titled "hanging transaction" once Kafka calls the transaction
hanging (issue 27).  The related findings are named by their titles in the summary, never by
rule id.  ``since`` is the incident's one clock: the earliest start any member knows (the
LSO stall's first poll at the pinned LSO), the same moment the console and the API show.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Final

from txnwatch.alerting.conditions import (
    FLINK_LINGERING_TRANSACTION,
    HANGING_TRANSACTION,
    LSO_STALL,
    PREPARE_STUCK,
    TRANSACTION_TIMEOUT_EXCEEDED,
    Condition,
)
from txnwatch.core.vocabulary import BY_RULE

GROUP_DETAIL: Final = "incident_group"
ROOT_CAUSE: Final = "root_cause"
# Most telling first: the root cause, then what it causes.
#: A lingering Flink transaction says why its producer's transaction outlives its timeout and pins the LSO (and what
#: ends it), so it is the root cause of the timeout and the stalls it causes; a hanging one or a stuck Prepare* still
#: says more (only a partition abort ends the first; the second is the brokers').
PRECEDENCE: Final[dict[str, int]] = {HANGING_TRANSACTION: 0, PREPARE_STUCK: 1, FLINK_LINGERING_TRANSACTION: 2,
                                     TRANSACTION_TIMEOUT_EXCEEDED: 3, LSO_STALL: 4}


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
        root = members[0]  # the most telling member: what the incident is about, whoever leads the key
        related = [_related(m) for m in members if m.incident_key != root.incident_key]
        titles = sorted({BY_RULE[r["rule"]].title if r["rule"] in BY_RULE else r["rule"] for r in related})
        summary = root.summary + (f" (+{len(related)} related: {', '.join(titles)})" if related else "")
        details: dict[str, Any] = {**root.details, GROUP_DETAIL: group, ROOT_CAUSE: root.rule, "related": related}
        since = min((at for m in members if (at := _moment(m.details.get("since"))) is not None), default=None)
        if since is not None:
            details["since"] = since.isoformat()
        out.append(replace(base, rule=lead_rule, incident_key=lead_key, summary=summary, details=details))
    return out


def root_cause(details: Mapping[str, Any] | None, rule: str) -> str:
    """The rule an alert is about (its root cause), which may differ from the rule that keeps its key."""
    found = (details or {}).get(ROOT_CAUSE)
    return found if isinstance(found, str) and found in BY_RULE else rule


def _related(condition: Condition) -> dict[str, Any]:
    return {"rule": condition.rule, "incident_key": condition.incident_key, "summary": condition.summary,
            "details": dict(condition.details)}


def _moment(value: Any) -> datetime | None:
    """A ``since`` detail as an aware datetime; None when absent or unreadable (a detail is JSON text from a
    column: never trust its shape)."""
    if isinstance(value, datetime):
        at = value
    elif isinstance(value, str):
        try:
            at = datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


def incident_since(details: Mapping[str, Any] | None, started_at: datetime) -> datetime:
    """The incident's one clock: the earliest start its findings know (``details["since"]``), else the moment the
    alert opened.  Every "since" and "for" of the incident (console, API, page) counts from here."""
    started = started_at if started_at.tzinfo is not None else started_at.replace(tzinfo=timezone.utc)
    known = _moment((details or {}).get("since"))
    return started if known is None else min(known, started)
