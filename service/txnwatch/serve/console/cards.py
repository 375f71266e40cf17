"""One incident, one card: a pinned partition's cause and effects together on the Now page.

A hanging transaction pins the LSO of its partition, the LSO stall follows, and the
read_committed groups there wait: three findings, one incident, and one alert (the
evaluator folds them, alerting/grouping.py).  The Now page used to show a card for the
hanging transaction, another for the stall with the same text and abort command, and the
alert in a table apart.  Here they become one card per partition, titled and ranked by its
root cause (hanging first, then the oldest), carrying the alert that pages for it and one
clock: the incident's ``since``, the same moment ``/api/v1/alerts`` reports.

Pure: rows and dicts in, cards out; the router reads the database.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from txnwatch.alerting.grouping import PRECEDENCE, incident_since, root_cause
from txnwatch.core.vocabulary import BY_RULE, HANGING_TRANSACTION, LSO_STALL

PartitionKey = tuple[str, str, int]  # cluster, topic, partition


@dataclass(frozen=True)
class Card:
    cluster: str
    topic: str
    partition: int
    root_cause: str  # the rule the card is about
    hanging: Mapping[str, Any] | None  # IncidentBuilder's dict
    stall: Mapping[str, Any] | None
    alert: Any | None  # the alerts row that pages for this incident, if any
    since: datetime

    @property
    def title(self) -> str:
        return BY_RULE[self.root_cause].title

    @property
    def context(self) -> Mapping[str, Any]:
        """The partition facts (groups, invisible records, abort command): the same for cause and effect."""
        found = self.hanging or self.stall
        assert found is not None  # a card has one or the other
        return found


def _aware(at: datetime | None) -> datetime | None:
    return at if at is None or at.tzinfo is not None else at.replace(tzinfo=timezone.utc)


def _alert_partition(alert: Any) -> PartitionKey | None:
    labels = alert.labels or {}
    topic, partition = labels.get("topic"), str(labels.get("partition") or "")
    if alert.cluster_name is None or not isinstance(topic, str) or not partition.isdigit():
        return None
    return alert.cluster_name, topic, int(partition)


def build(hanging: Iterable[Mapping[str, Any]], stalls: Iterable[Mapping[str, Any]],
          alerts: Sequence[Any]) -> tuple[list[Card], list[Any]]:
    """(cards ranked by root cause then age, the alerts that belong to no card)."""
    by_key: dict[PartitionKey, dict[str, Any]] = {}
    for found in hanging:
        by_key.setdefault((found["cluster"], found["topic"], found["partition"]), {}).setdefault("hanging", found)
    for found in stalls:
        if found.get("ended_at") is None:
            by_key.setdefault((found["cluster"], found["topic"], found["partition"]), {}).setdefault("stall", found)
    rest: list[Any] = []
    for alert in alerts:
        key = _alert_partition(alert)
        if key in by_key and "alert" not in by_key[key] and \
                root_cause(alert.details, alert.rule) in (HANGING_TRANSACTION, LSO_STALL):
            by_key[key]["alert"] = alert
        else:
            rest.append(alert)
    cards = []
    for (cluster, topic, partition), parts in by_key.items():
        h: Mapping[str, Any] | None = parts.get("hanging")
        s: Mapping[str, Any] | None = parts.get("stall")
        alert = parts.get("alert")
        starts = [_aware(s["started_at"]) if s else None,
                  _aware((h["first_write_at"] or h["first_seen_at"]) if h else None),
                  incident_since(alert.details, alert.started_at) if alert is not None else None]
        since = min(at for at in starts if at is not None)
        cards.append(Card(cluster, topic, partition, HANGING_TRANSACTION if h else LSO_STALL, h, s, alert, since))
    cards.sort(key=lambda c: (PRECEDENCE.get(c.root_cause, 99), c.since, c.topic, c.partition))
    return cards, rest
