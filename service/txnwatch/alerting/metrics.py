"""Alerting's own series: deliveries counted where they happen, the outbox's and the evaluator's gauges.

The outbox dispatcher counts each delivery attempt as it settles it and sets the
outbox gauges from the rows it has just read; the alert sink sets the firing gauge
after each evaluation.  Nothing is recomputed from rows that retention deletes, so
``txnwatch_notifications_total`` only goes up (it used to be summed from outbox
rows and fell when old rows were purged).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from prometheus_client import Counter, Gauge
from prometheus_client.registry import CollectorRegistry

ACTIONS = ("trigger", "resolve")
RESULTS = ("sent", "failed")


class AlertingMetrics:
    """``registry=None`` keeps the series unregistered (tests, tools that never serve /metrics)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.notifications = Counter("txnwatch_notifications", "Notification delivery attempts by action and result.",
                                     ["action", "result"], registry=registry)
        self.outbox_pending = Gauge("txnwatch_outbox_pending", "Notifications in the outbox not yet delivered.",
                                    registry=registry)
        self.outbox_oldest_age = Gauge("txnwatch_outbox_oldest_pending_age_seconds",
                                       "Age of the oldest undelivered notification (0 when empty).", registry=registry)
        self.alerts_firing = Gauge("txnwatch_alerts_firing", "Built-in alert evaluator: incidents firing per rule.",
                                   ["cluster", "alertname", "severity"], registry=registry)
        for action in ACTIONS:
            for result in RESULTS:
                self.notifications.labels(action, result)

    def delivered(self, action: str, sent: bool) -> None:
        self.notifications.labels(action, "sent" if sent else "failed").inc()

    def outbox(self, pending: int, oldest_created_at: datetime | None, now: datetime) -> None:
        self.outbox_pending.set(pending)
        self.outbox_oldest_age.set(max(0.0, (now - oldest_created_at).total_seconds()) if oldest_created_at else 0.0)

    def firing(self, cluster: str, counts: Mapping[tuple[str, str], int]) -> None:
        for (rule, severity), count in counts.items():
            self.alerts_firing.labels(cluster, rule, severity).set(count)
