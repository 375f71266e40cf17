"""The alerting subsystem as the daemon sees it: evaluate after each poll, deliver in the background.

Kept apart from runtime/wiring.py so that wiring stays a few lines and this glue is testable
without Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from txnwatch.alerting.conditions import Condition
from txnwatch.alerting.evaluator import EvaluationResult, evaluate, retire_clusters
from txnwatch.alerting.metrics import AlertingMetrics
from txnwatch.alerting.outbox import PAGERDUTY, Notifier, OutboxDispatcher, OutboxLoop, SendGuard
from txnwatch.alerting.pagerduty import DEFAULT_RUNBOOK_URL, PagerDutyNotifier
from txnwatch.alerting.rules import effective_rules
from txnwatch.alerting.webhook import SLACK, WEBHOOK, WebhookNotifier, slack_body, webhook_body
from txnwatch.core.config import AlertRuleConfig, Settings
from txnwatch.core.logbudget import FailureStreak

log = logging.getLogger(__name__)

GAP_POLLS = 5  # missed ticks (interval + connect timeout each) after which a pending alert's `for` starts over
HOUSEKEEPING = "*"  # the fleet-wide lease (txnwatch.fleet.balance.HOUSEKEEPING)


class Leases(SendGuard, Protocol):
    """What alerting needs of the fleet's leases: the fencing checks for writes and sends."""

    def fence(self, session: Session, cluster: str) -> None: ...


def runbook_document_url(settings: Settings) -> str:
    """The runbooks an operator can open: their own copy, else this txnwatch's console, else the project's."""
    if settings.console.runbook_url:
        return settings.console.runbook_url
    if settings.public_url and settings.console.enabled:
        return settings.public_url.rstrip("/") + "/console/runbooks"
    return DEFAULT_RUNBOOK_URL


def slowest_tick_seconds(settings: Settings) -> float:
    """The longest a cluster's reports may legitimately be apart: its interval plus its connect timeout.

    A down cluster is reported once per tick, and each tick of a backed-off cluster first probes it
    (a bootstrap bounded by ``connect_timeout_ms``, not by the interval): a 1 s interval with the 5 s
    default connect timeout reports every ~6 s.  A gap window of poll intervals alone (5 s there)
    restarted ``cluster_down``'s ``for:`` on every report, so a long outage never paged.
    """
    ticks = [settings.interval_for(c) + c.connect_timeout_ms / 1000 for c in settings.clusters]
    return max(ticks or [settings.poll_interval_seconds])


class Alerting:
    """One per process. ``evaluate`` runs on the collector's thread, delivery on the loop's."""

    def __init__(self, sessions: sessionmaker[Session], rules: Mapping[str, AlertRuleConfig],
                 notifiers: Mapping[str, Notifier], *, max_attempts: int = 20,
                 leading: Callable[[], bool] = lambda: True, interval_seconds: float = 1.0,
                 max_gap_seconds: float | None = None, metrics: AlertingMetrics | None = None,
                 leases: Leases | None = None) -> None:
        self._sessions = sessions
        self.metrics = metrics or AlertingMetrics()
        self._rules = dict(rules)
        self._channels = tuple(notifiers)
        self._notifiers = dict(notifiers)
        self._max_gap = max_gap_seconds
        self._fence_streaks: dict[str, FailureStreak] = {}
        self._leases = leases
        self.dispatcher = OutboxDispatcher(sessions, notifiers, max_attempts=max_attempts, metrics=self.metrics,
                                           guard=leases)
        self.loop = OutboxLoop(self.dispatcher, interval_seconds=interval_seconds, active=leading)

    @property
    def rules(self) -> Mapping[str, AlertRuleConfig]:
        """The effective rules (defaults merged with the settings), e.g. to publish zero counts per rule."""
        return self._rules

    @classmethod
    def from_settings(cls, settings: Settings, sessions: sessionmaker[Session], *,
                      leading: Callable[[], bool] = lambda: True, leases: Leases | None = None,
                      client_url: str | None = None,
                      runbook_base_url: str | None = None,
                      extra_notifiers: Mapping[str, Notifier] | None = None,
                      metrics: AlertingMetrics | None = None) -> Alerting:
        notifiers: dict[str, Notifier] = {}
        if settings.pagerduty.enabled:
            notifiers[PAGERDUTY] = PagerDutyNotifier.from_config(
                settings.pagerduty, client_url if client_url is not None else settings.public_url, runbook_base_url,
                runbook_document_url(settings))
        for channel, config in ((WEBHOOK, settings.notifiers.webhook), (SLACK, settings.notifiers.slack)):
            if config.enabled and config.url is not None:
                render = slack_body if channel == SLACK else webhook_body
                notifiers[channel] = WebhookNotifier(config.url, render=render, timeout_seconds=config.timeout_seconds)
        notifiers.update(extra_notifiers or {})
        if not notifiers:
            log.info("alerting: no notifier enabled; alerts are tracked in the database and the API only")
        return cls(sessions, effective_rules(settings.alert_rules), notifiers,
                   max_attempts=settings.pagerduty.max_attempts, leading=leading,
                   max_gap_seconds=GAP_POLLS * slowest_tick_seconds(settings), metrics=metrics, leases=leases)

    def evaluate(self, cluster: str, conditions: Iterable[Condition], now: datetime) -> EvaluationResult:
        """One poll's complete condition set for ``cluster``, in its own transaction; wakes delivery if it paged.

        With leases, the transaction first checks this replica's lease epoch for the cluster
        (and holds its row until commit): a replica that lost the lease writes nothing.
        """
        with self._sessions.begin() as session:
            if self._leases is not None:
                streak = self._fence_streaks.setdefault(cluster, FailureStreak(log, f"alerts of {cluster}: lease check"))
                try:
                    self._leases.fence(session, cluster)
                except Exception as exc:  # the database is down, or the lease moved: one line per streak
                    streak.failed(exc)
                    return EvaluationResult()
                streak.ok()
            result = evaluate(session, cluster, conditions, now, self._rules, channels=self._channels,
                              max_gap_seconds=self._max_gap)
        if (result.fired or result.resolved or result.retitled) and self._channels:
            self.loop.wake()
        return result

    def retire_clusters(self, configured: Iterable[str], now: datetime) -> list[str]:
        with self._sessions.begin() as session:
            if self._leases is not None:
                self._leases.fence(session, HOUSEKEEPING)
            retired = retire_clusters(session, configured, now, channels=self._channels)
        if retired and self._channels:
            self.loop.wake()  # their resolves are queued: deliver them now, not at the idle loop's next look
        return retired

    def start(self) -> None:
        self.loop.start()

    def stop(self, deadline_seconds: float = 10.0) -> None:
        self.loop.stop(deadline_seconds)
        for notifier in self._notifiers.values():
            close = getattr(notifier, "close", None)
            if close is not None:
                close()
