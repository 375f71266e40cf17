"""The background loop: delivers without being asked twice, and flushes on stop within its deadline."""

from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty
from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import dispatcher, hanging, outbox, rules, step
from txnwatch.alerting import OutboxLoop
from txnwatch.alerting.outbox import Delivery
from txnwatch.store import models as m


def test_loop_delivers_and_stops(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    loop = OutboxLoop(dispatcher(sessions, pagerduty.url), interval_seconds=0.02)
    loop.start()
    try:
        step(sessions, [hanging()], datetime.now(timezone.utc), rules(for_seconds=0))
        loop.wake()
        deadline = time.monotonic() + 5
        while not pagerduty.accepted and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        loop.stop(deadline_seconds=5)
    assert [a for a, _ in pagerduty.actions()] == ["trigger"]


def test_stop_flushes_what_is_due(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    loop = OutboxLoop(dispatcher(sessions, pagerduty.url), interval_seconds=3600, active=lambda: False)
    loop.start()  # inactive (not the leader yet): nothing goes out while running
    step(sessions, [hanging()], datetime.now(timezone.utc), rules(for_seconds=0))
    time.sleep(0.05)
    assert pagerduty.accepted == []
    flushing = OutboxLoop(dispatcher(sessions, pagerduty.url), interval_seconds=3600)
    flushing.stop(deadline_seconds=5)  # never started: stop still flushes
    loop.stop(deadline_seconds=1)
    assert [a for a, _ in pagerduty.actions()] == ["trigger"]
    assert [e.status for e in outbox(sessions)] == ["sent"]


class SlowNotifier:
    def __init__(self) -> None:
        self.entered = threading.Event()

    def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery:
        self.entered.set()
        time.sleep(0.3)
        return Delivery("sent")


def test_stop_does_not_flush_over_a_send_in_flight(sessions: sessionmaker[Session]) -> None:
    from txnwatch.alerting import OutboxDispatcher

    notifier = SlowNotifier()
    step(sessions, [hanging()], datetime.now(timezone.utc), rules(for_seconds=0))
    loop = OutboxLoop(OutboxDispatcher(sessions, {"pagerduty": notifier}), interval_seconds=0.01)
    loop.start()
    assert notifier.entered.wait(5)
    loop.stop(deadline_seconds=0.05)
    assert [e.status for e in outbox(sessions)] == ["pending"]  # stop returned without waiting for the send
    time.sleep(0.4)
    assert [e.status for e in outbox(sessions)] == ["sent"]  # the in-flight send still completed, once


class CountingDispatcher:
    """Wraps a dispatcher and counts its runs."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.runs = inner, 0

    def run_once(self, now: datetime, *, deadline: Any = None) -> Any:
        self.runs += 1
        return self.inner.run_once(now, deadline=deadline)


def test_an_empty_outbox_is_not_queried_every_tick_and_a_wake_still_pages_at_once(
        sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    """Issue 25: the loop queried the empty outbox every second.  Empty, it now waits for a wake (or the long
    idle fallback); a commit that queued a page wakes it, and the page goes out without waiting for that."""
    counting = CountingDispatcher(dispatcher(sessions, pagerduty.url))
    loop = OutboxLoop(counting, interval_seconds=0.02, idle_seconds=3600)  # type: ignore[arg-type]
    loop.start()
    try:
        time.sleep(0.3)  # ~15 ticks at the short interval
        assert counting.runs == 1
        step(sessions, [hanging()], datetime.now(timezone.utc), rules(for_seconds=0))
        loop.wake()
        deadline = time.monotonic() + 5
        while not pagerduty.accepted and time.monotonic() < deadline:
            time.sleep(0.01)
        assert [a for a, _ in pagerduty.actions()] == ["trigger"]
    finally:
        loop.stop(deadline_seconds=5)


def test_pending_rows_keep_the_short_interval(sessions: sessionmaker[Session]) -> None:
    """A row that is pending (here, not due yet after a failed send) is looked at every interval, as before."""

    class Failing:
        def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery:
            return Delivery("retry", "down")

    from txnwatch.alerting import OutboxDispatcher

    step(sessions, [hanging()], datetime.now(timezone.utc), rules(for_seconds=0))
    counting = CountingDispatcher(OutboxDispatcher(sessions, {"pagerduty": Failing()}))
    loop = OutboxLoop(counting, interval_seconds=0.02, idle_seconds=3600)  # type: ignore[arg-type]
    loop.start()
    try:  # ~15 checks in 0.3 s at 0.02 s; a loaded machine gets up to 5 s (the idle wait would give 1)
        deadline = time.monotonic() + 5.0
        while counting.runs < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        loop.stop(deadline_seconds=0.5)
    assert counting.runs >= 5
    assert [e.status for e in outbox(sessions)] == ["pending"]
