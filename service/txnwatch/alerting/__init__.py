"""Built-in alerting: conditions from the collector → alert state in the DB → notification outbox → PagerDuty.

The evaluator and the dispatcher share nothing but the database, so either can
restart (or run on another replica after a leader change) without losing or
repeating a page.

Daemon use::

    alerting = Alerting.from_settings(settings, sessions, leading=leadership.is_leader)
    alerting.retire_clusters([c.name for c in settings.clusters], now)   # once, at start
    alerting.start()                                                     # delivery thread
    alerting.evaluate(cluster, conditions, now)   # after every poll: the COMPLETE active set
    alerting.stop(deadline_seconds=10)            # flushes due events
"""

from txnwatch.alerting.conditions import RULES, Condition
from txnwatch.alerting.evaluator import EvaluationResult, evaluate
from txnwatch.alerting.outbox import DispatchStats, OutboxDispatcher, OutboxLoop
from txnwatch.alerting.pagerduty import PagerDutyNotifier, pagerduty_event
from txnwatch.alerting.rules import effective_rules
from txnwatch.alerting.service import Alerting

__all__ = [
    "RULES",
    "Alerting",
    "Condition",
    "DispatchStats",
    "EvaluationResult",
    "OutboxDispatcher",
    "OutboxLoop",
    "PagerDutyNotifier",
    "effective_rules",
    "evaluate",
    "pagerduty_event",
]
