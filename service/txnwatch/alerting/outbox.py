"""The notification outbox: rows written with the alert change, delivered later, in order, at least once.

Delivery happens outside any DB transaction (a slow PagerDuty must not hold locks)
and each outcome is committed right after the HTTP answer, so after a restart only
the events without a recorded 202 go out again.
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Literal, Protocol

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.alerting.metrics import AlertingMetrics
from txnwatch.alerting.snapshot import alert_snapshot, dedup_key
from txnwatch.core import threadnames
from txnwatch.core.backoff import Backoff
from txnwatch.core.logbudget import FailureStreak
from txnwatch.core.redact import redact
from txnwatch.store import models as m

log = logging.getLogger(__name__)

PAGERDUTY = "pagerduty"
Action = Literal["trigger", "resolve"]
PENDING, SENT, FAILED = "pending", "sent", "failed"
LAST_ERROR_MAX = 2000


def enqueue(session: Session, alert: m.Alert, action: Action, channel: str, now: datetime) -> m.OutboxEvent:
    """Queue one notification in the caller's transaction (the one that changes the alert)."""
    event = m.OutboxEvent(alert_id=alert.id, channel=channel, action=action, dedup_key=dedup_key(alert.incident_key),
                          payload=alert_snapshot(alert), status=PENDING, attempts=0, created_at=now,
                          next_attempt_at=now, sent_at=None, last_error=None)
    session.add(event)
    return event


@dataclass(frozen=True)
class Delivery:
    """A notifier's verdict on one attempt."""

    outcome: Literal["sent", "retry", "failed"]
    detail: str = ""
    retry_after_seconds: float | None = None


class SendGuard(Protocol):
    """The fencing check of a fleet (txnwatch.fleet.leases): may this replica page for ``cluster`` now?

    The context yields the seconds the send may take, or None to refuse it; the lease
    is not given up while the context is open.
    """

    def send_window(self, cluster: str | None) -> AbstractContextManager[float | None]: ...


class Notifier(Protocol):
    def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery: ...


#: Delay before retrying a delivery: 2 s doubling up to 10 minutes, jittered over the upper half (with the rng).
OUTBOX_BACKOFF = Backoff(base_s=2.0, cap_s=600.0)


@dataclass
class DispatchStats:
    sent: int = 0
    retried: int = 0
    failed: int = 0
    waiting: int = 0  # pending rows left behind: not due yet, or queued behind an undelivered one
    fenced: int = 0  # pending rows another replica holds the lease for (or this one lost it)
    pending: int = 0  # rows still pending after this run: left waiting, or tried and due again later
    oldest_pending_at: datetime | None = None  # created_at of the oldest of them
    settled_ids: set[int] = field(default_factory=set, repr=False, compare=False)


class OutboxDispatcher:
    """Delivers due outbox rows; one instance per process, only on the leader."""

    def __init__(self, sessions: sessionmaker[Session], notifiers: Mapping[str, Notifier], *, max_attempts: int = 20,
                 backoff: Backoff = OUTBOX_BACKOFF, rng: random.Random | None = None,
                 metrics: AlertingMetrics | None = None, guard: SendGuard | None = None) -> None:
        self._sessions = sessions
        self._metrics = metrics or AlertingMetrics()
        self._notifiers = dict(notifiers)
        self._max_attempts = max_attempts
        self._backoff = backoff
        self._rng = rng or random.Random()
        self._guard = guard

    def run_once(self, now: datetime, *, deadline: Callable[[], float] | None = None) -> DispatchStats:
        """Deliver what is due at ``now``; a resolve waits behind its pending trigger, whatever their due times.

        ``deadline`` returns the seconds left (shutdown flush); nothing new starts once it is spent.
        """
        stats = DispatchStats()
        with self._sessions() as session:
            rows = session.scalars(select(m.OutboxEvent)
                                   .where(m.OutboxEvent.status == PENDING,
                                          m.OutboxEvent.channel.in_(list(self._notifiers)))
                                   .order_by(m.OutboxEvent.id)).all()
        queues: dict[tuple[str, str], list[m.OutboxEvent]] = {}
        for row in rows:
            queues.setdefault((row.channel, row.dedup_key), []).append(row)
        for (channel, _key), queue in queues.items():
            notifier = self._notifiers[channel]
            for position, event in enumerate(queue):
                left = deadline() if deadline else None
                if event.next_attempt_at > now or (left is not None and left <= 0):
                    stats.waiting += len(queue) - position
                    break
                with self._window(event) as lease_left:
                    if lease_left is None:  # not this replica's cluster, or its lease is gone: the holder pages
                        stats.fenced += len(queue) - position
                        break
                    timeout = lease_left if left is None else min(left, lease_left)
                    if not self._deliver(notifier, event, now, None if math.isinf(timeout) else timeout, stats):
                        stats.waiting += len(queue) - position - 1
                        break
        still_pending = [row.created_at for row in rows if row.id not in stats.settled_ids]
        stats.pending, stats.oldest_pending_at = len(still_pending), min(still_pending, default=None)
        self._metrics.outbox(stats.pending, stats.oldest_pending_at, now)
        return stats

    def _window(self, event: m.OutboxEvent) -> AbstractContextManager[float | None]:
        if self._guard is None:
            return nullcontext(math.inf)
        payload = event.payload or {}
        cluster = payload.get("cluster") or (payload.get("labels") or {}).get("cluster")
        return self._guard.send_window(cluster if isinstance(cluster, str) else None)

    def _deliver(self, notifier: Notifier, event: m.OutboxEvent, now: datetime, timeout: float | None,
                 stats: DispatchStats) -> bool:
        """Returns whether later events of the same dedup key may go now (the earlier one is settled)."""
        try:
            delivery = notifier.send(event, timeout)
        except Exception as exc:  # a notifier bug must not kill the loop, nor be mistaken for a 4xx
            # Its traceback may quote a request's URL: the log's formatters redact every line, the registered
            # secrets included (txnwatch.core.logs).
            log.exception("notifier %s crashed on outbox event %s", event.channel, event.id)
            delivery = Delivery("retry", f"{type(exc).__name__}: {exc}")
        # Every secret a notifier holds (txnwatch.core.redact.register), in every spelling, before the detail
        # is stored in last_error or logged: the notifiers scrub their own, this catches whatever they missed.
        delivery = Delivery(delivery.outcome, redact(delivery.detail), delivery.retry_after_seconds)
        with self._sessions.begin() as session:
            row = session.get(m.OutboxEvent, event.id, with_for_update=True)
            if row is None or row.status != PENDING:
                stats.settled_ids.add(event.id)
                return True  # settled elsewhere (e.g. another replica); nothing to do
            attempts = row.attempts = row.attempts + 1
            self._metrics.delivered(event.action, delivery.outcome == "sent")
            if delivery.outcome == "sent":
                stats.settled_ids.add(event.id)
                row.status, row.sent_at, row.last_error = SENT, now, None
                stats.sent += 1
                log.info("%s %s delivered to %s (dedup_key=%s, attempt %d)", event.action, event.id, event.channel,
                         event.dedup_key, attempts)
                return True
            row.last_error = delivery.detail[:LAST_ERROR_MAX]
            if delivery.outcome == "failed" or attempts >= self._max_attempts:
                stats.settled_ids.add(event.id)
                row.status = FAILED
                stats.failed += 1
                log.error("%s %s to %s FAILED for good after %d attempt(s) (dedup_key=%s): %s", event.action,
                          event.id, event.channel, attempts, event.dedup_key, delivery.detail)
                return True
            delay = self._backoff.delay(attempts, self._rng)
            if delivery.retry_after_seconds is not None:
                delay = max(delay, min(delivery.retry_after_seconds, self._backoff.cap_s))
            row.next_attempt_at = now + timedelta(seconds=delay)
            stats.retried += 1
            log.warning("%s %s to %s not delivered (attempt %d, retry in %.1fs): %s", event.action, event.id,
                        event.channel, attempts, delay, delivery.detail)
            return False


#: The outbox loop's wait when the outbox is empty: a wake (a commit that queued rows) ends it at once.
IDLE_SECONDS = 10.0


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


class OutboxLoop:
    """Runs the dispatcher on a thread; ``stop`` flushes what is due within a deadline instead of dropping it."""

    def __init__(self, dispatcher: OutboxDispatcher, *, interval_seconds: float = 1.0,
                 idle_seconds: float = IDLE_SECONDS,
                 clock: Callable[[], datetime] = _utcnow, active: Callable[[], bool] = lambda: True) -> None:
        self._dispatcher = dispatcher
        self._interval = interval_seconds
        self._idle = max(idle_seconds, interval_seconds)
        self._clock = clock
        self._active = active
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._streak = FailureStreak(log, "outbox delivery")  # one line per outage, not one per tick

    def start(self) -> None:
        self._thread = threadnames.thread(self._run, "outbox")
        self._thread.start()

    def wake(self) -> None:
        """Called after a commit that queued events, so a page does not wait for the next tick."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            stats = self._tick(None)
            self._wake.wait(self._wait_after(stats))
            self._wake.clear()

    def _wait_after(self, stats: DispatchStats | None) -> float:
        """Until the next look at the outbox: ``interval`` while rows are pending (retries fall due, a queue
        moves on) or when the run did not happen (not the leader yet, the database down); ``idle`` when the
        outbox was empty.  Rows queued in this process wake the loop at once (:meth:`wake`), so the long wait
        only bounds rows another replica queued (issue 25: the empty table was queried every second)."""
        if stats is None or stats.pending:
            return self._interval
        return self._idle

    def _tick(self, deadline: Callable[[], float] | None) -> DispatchStats | None:
        if not self._active():
            return None
        try:
            stats = self._dispatcher.run_once(self._clock(), deadline=deadline)
        except Exception as exc:  # the DB may be down; the rows wait for the next tick
            self._streak.failed(exc)
            return None
        self._streak.ok()
        return stats

    def stop(self, deadline_seconds: float = 10.0) -> None:
        end = time.monotonic() + deadline_seconds
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(max(0.0, end - time.monotonic()))
            if self._thread.is_alive():  # still inside a slow send; a flush now could send twice
                log.warning("outbox loop did not stop within %.1fs; undelivered events wait for the next start",
                            deadline_seconds)
                return

        def remaining() -> float:
            return end - time.monotonic()

        while remaining() > 0:
            stats = self._tick(remaining)
            if stats is None or (stats.sent == 0 and stats.failed == 0):
                break  # nothing left that is due, or only retries that must wait
