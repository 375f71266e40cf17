"""txnwatch_notifications_total is counted as deliveries happen: a purge of old outbox rows or a restart never
takes it down (it used to be summed from the rows, and fell from 10 to 3 after a retention run)."""

from __future__ import annotations

import itertools
import random

from prometheus_client.registry import CollectorRegistry
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty
from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import ROUTING_KEY, at, hanging, rules, step
from txnwatch.alerting import OutboxDispatcher, PagerDutyNotifier
from txnwatch.alerting.metrics import AlertingMetrics
from txnwatch.store import models as m
from txnwatch.store.retention import purge


def started(sessions: sessionmaker[Session], url: str) -> tuple[CollectorRegistry, OutboxDispatcher]:
    """What a (re)started daemon has: a fresh registry and the dispatcher that counts into it."""
    registry = CollectorRegistry(auto_describe=False)
    notifier = PagerDutyNotifier(SecretStr(ROUTING_KEY), events_url=url, timeout_seconds=5)
    return registry, OutboxDispatcher(sessions, {"pagerduty": notifier}, rng=random.Random(7),
                                      metrics=AlertingMetrics(registry))


def sent(registry: CollectorRegistry, action: str) -> float:
    value = registry.get_sample_value("txnwatch_notifications_total", {"action": action, "result": "sent"})
    assert value is not None
    return value


def test_notification_counter_never_goes_down_on_purge_and_starts_from_zero_after_restart(
        sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs = rules(for_seconds=0)
    registry, dispatcher = started(sessions, pagerduty.url)
    incidents = [hanging(partition=p) for p in range(4)]
    step(sessions, incidents, at(0), rs)
    assert dispatcher.run_once(at(0)).sent == 4
    step(sessions, incidents[:1], at(10), rs)  # three resolve
    assert dispatcher.run_once(at(10)).sent == 3
    readings = [(sent(registry, "trigger"), sent(registry, "resolve"))]
    assert readings[-1] == (4, 3)

    deleted = purge(sessions, at(40 * 86_400), days=30)  # retention takes the sent rows
    assert deleted[m.OutboxEvent.__tablename__] == 7
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(m.OutboxEvent)) == 0
    readings.append((sent(registry, "trigger"), sent(registry, "resolve")))
    step(sessions, [], at(40 * 86_400), rs)  # the last one resolves after the purge
    dispatcher.run_once(at(40 * 86_400))
    readings.append((sent(registry, "trigger"), sent(registry, "resolve")))
    assert readings == [(4, 3), (4, 3), (4, 4)]
    assert all(a <= b for earlier, later in itertools.pairwise(readings) for a, b in zip(earlier, later, strict=True))

    registry, dispatcher = started(sessions, pagerduty.url)  # restart: counted from zero, not from rows
    assert (sent(registry, "trigger"), sent(registry, "resolve")) == (0, 0)
    step(sessions, [hanging(partition=9)], at(40 * 86_400 + 60), rs)
    dispatcher.run_once(at(40 * 86_400 + 60))
    assert (sent(registry, "trigger"), sent(registry, "resolve")) == (1, 0)
    assert registry.get_sample_value("txnwatch_outbox_pending") == 0
