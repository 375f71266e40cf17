"""Poll → detect → store → publish, once per cluster per interval.

One APScheduler job per cluster, ``max_instances=1`` so a cluster's polls never
overlap, and a thread per cluster so a slow or dead cluster never delays another.
A failing cluster is marked down with its reason and polled again with exponential
backoff; nothing a cluster or the database does can stop the daemon.

Backoff without blindness.  The backoff only spaces out the *full poll* (ListTransactions
on every broker, DescribeProducers per leader, offsets, groups).  Every scheduled tick in
between still does two cheap things:

* it tells the sinks that take ``on_still_down`` (the alerting) that the cluster is still
  down, so the evaluator sees ``cluster_down`` once per interval however long the backoff
  has grown: its ``for:`` clock is never restarted as if nobody had been watching, and the
  page goes out within ``for:`` plus one interval of the outage's start;
* it runs the poller's ``probe()`` (a bootstrap: one connection, ApiVersions and Metadata).
  Once a probe that had failed succeeds, the cluster is back and the full poll runs at once,
  so polling returns to its interval within one interval of the cluster's return.  A
  cluster that answers the probe but fails the poll (overloaded, ACL trouble) stays backed
  off: the probe cannot tell that it recovered, and backing off is what such a cluster needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from typing import Generic, Protocol, TypeVar

from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler

from txnwatch.core import threadnames
from txnwatch.core.backoff import Backoff
from txnwatch.core.findings import Findings
from txnwatch.core.logbudget import FailureStreak
from txnwatch.core.model import ClusterSnapshot
from txnwatch.core.pollwindow import PROCESS, PollWindow
from txnwatch.core.views import ClusterView, LatestState

log = logging.getLogger(__name__)


class Poller(Protocol):
    def poll(self) -> ClusterSnapshot: ...
    def close(self) -> None: ...


class Probe(Protocol):
    """Optional on a Poller: raises if the cluster cannot be reached at all; cheap compared with a poll."""

    def probe(self) -> None: ...


class Sink(Protocol):
    """Receives every poll's outcome: the store, the alert evaluator.

    A sink may also define ``on_still_down(cluster, error, now_ms)``: called on every tick the
    collector spends backing off, so time-based judgements (an alert's ``for:``) keep running.
    """

    def on_poll(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None,
                now_ms: int) -> None: ...


#: The detector's state between two polls: opaque to the loop, which only keeps it and hands it back (detect/).
State = TypeVar("State")

Evaluate = Callable[[State, ClusterSnapshot, int], tuple[State, Findings]]
"""(previous detector state, snapshot, now_ms) -> (next detector state, findings); pure."""


#: Brokers x reasons of refused answers kept per cluster (a hostile Metadata answer may name any number of brokers).
MAX_REFUSED_SERIES = 50

#: Delay before retrying a failing cluster: 5 s, doubling per failure, at most 5 minutes.
POLL_BACKOFF = Backoff(base_s=5.0, cap_s=300.0)


class ClusterPollLoop(Generic[State]):
    """Owns one cluster's connection and detector state; only its own job thread touches them."""

    def __init__(
        self,
        name: str,
        connect: Callable[[], Poller],
        evaluate: Evaluate[State],
        start_state: Callable[[], State],
        sinks: list[Sink],
        state: LatestState,
        count_events: Callable[[Findings | None], dict[str, int]] = lambda findings: {},
        clock: Callable[[], float] = time.time,
        backoff: Backoff = POLL_BACKOFF,
        leading: Callable[[], object] = lambda: True,
        window: PollWindow = PROCESS,
    ) -> None:
        self.name = name
        self._window = window
        self._connect = connect
        self._evaluate = evaluate
        self._detector_state: State | None = None  # None until the first poll of a leadership term
        self._sinks = sinks
        self._state = state
        self._count_events = count_events
        self._clock = clock
        self._backoff = backoff
        self._poller: Poller | None = None
        self._retry_at = 0.0
        self._leading = leading
        self._start_state = start_state
        self._term: object = None
        self._poll_id = 0
        self._probe_failed = False  # since the last full-poll failure; its success means "the cluster is back"
        # One line per state change and a reminder, not a line (or a traceback) per failed poll: see core/logbudget.py.
        self._down = FailureStreak(log, f"cluster {name}: polls")
        self._sink_streaks: dict[str, FailureStreak] = {}

    def poll_once(self) -> None:
        """One scheduled tick; returns early while backing off or while another replica holds the cluster.

        ``leading()`` returns this replica's term for the cluster (a lease epoch; falsy when
        another replica holds it): a new term, even one right after losing the cluster,
        starts from what the store says now, as whatever this replica knew is stale.
        """
        term = self._leading()
        if not term:
            if self._term:
                self._term = None
                self._close_poller()
                # The new holder exports this cluster's series now; ours would be stale duplicates.
                self._state.publish(ClusterView(name=self.name))
            return
        if term != self._term:
            self._term = term
            self._detector_state = self._start_state()
        now = self._clock()
        if now < self._retry_at and not self._back_early(now):
            return
        self._poll_id += 1
        try:
            if self._poller is None:
                self._poller = self._connect()
            with self._window.poll():  # no cyclic GC while the answers are decoded (txnwatch.core.pollwindow)
                snapshot = self._poller.poll()
        except Exception as exc:  # any failure of the cluster must leave the daemon running
            self._failed(exc, now)
            return
        if self._leading() != term:  # the lease ran out during the poll: another replica may be polling now
            log.warning("cluster %s: lease lost during the poll; its result is dropped", self.name,
                        extra=self._log_context())
            return
        now_ms = int(self._clock() * 1000)
        previous = self._detector_state if self._detector_state is not None else self._start_state()
        findings: Findings | None
        try:
            self._detector_state, findings = self._evaluate(previous, snapshot, now_ms)
        except Exception:
            log.exception("cluster %s: detection failed on this snapshot; keeping the previous detector state",
                          self.name, extra=self._log_context())
            findings = None
        view = self._state.get(self.name)
        counters = dict(view.counters) if view else {}
        for key, value in self._count_events(findings).items():
            counters[key] = counters.get(key, 0) + value
        self._state.update(
            self.name, up=True, polls=(view.polls if view else 0) + 1, consecutive_failures=0,
            last_poll_at_ms=snapshot.taken_at_ms, last_success_at_ms=snapshot.taken_at_ms,
            last_poll_duration_ms=snapshot.duration_ms, last_error=None, snapshot=snapshot,
            findings=findings, counters=counters,
        )
        self._retry_at = 0.0
        self._down.ok(extra=self._log_context())
        self._notify(snapshot, findings, None, now_ms)

    def _back_early(self, now: float) -> bool:
        """A tick inside the backoff: report the cluster still down, then probe; True when it is back.

        The report comes first: a probe of a cut-off cluster blocks for up to ``connect_timeout_ms``
        (several intervals), and a page that waited for it would go out that much later.
        """
        view = self._state.get(self.name)
        self._still_down((view.last_error if view else None) or "unreachable", now)
        error = self._probe()
        if error is None and self._probe_failed:
            self._probe_failed = False
            self._retry_at = 0.0
            return True
        if error is not None:
            self._probe_failed = True
        return False

    def _still_down(self, standing: str, now: float) -> None:
        for sink in self._sinks:
            still_down = getattr(sink, "on_still_down", None)
            if still_down is None:
                continue
            streak = self._sink_streak(sink)
            try:
                still_down(self.name, standing, int(now * 1000))
            except Exception as exc:
                streak.failed(exc, extra=self._log_context())
            else:
                streak.ok(extra=self._log_context())

    def _probe(self) -> str | None:
        """None if the cluster answers a bootstrap (or the poller cannot probe), else why not."""
        try:
            if self._poller is None:
                self._poller = self._connect()
            probe = getattr(self._poller, "probe", None)
            if probe is not None:
                probe()
        except Exception as exc:  # a probe is allowed to fail in every way a poll can
            return f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
        return None

    def _failed(self, exc: Exception, now: float) -> None:
        reason = f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
        view = self._state.get(self.name)
        failures = (view.consecutive_failures if view else 0) + 1
        delay = self._backoff.delay(failures)
        self._retry_at = now + delay
        # "No broker answered" counts as a failed probe, so the first probe that succeeds ends the backoff;
        # any other failure (the cluster answered, the poll still broke) waits the backoff out.
        self._probe_failed = bool(getattr(exc, "cluster_unreachable", False))
        self._down.failed(exc, extra=self._log_context())
        log.debug("cluster %s: poll failed (%s); retrying in %.0fs", self.name, reason, delay,
                  extra=self._log_context())
        refused = dict(view.refused) if view else {}
        for refusal in getattr(exc, "refusals", ()):  # core.model.ResponseRefused: which broker sent what
            key = (refusal.broker, refusal.reason)
            if key in refused or len(refused) < MAX_REFUSED_SERIES:
                refused[key] = refused.get(key, 0) + 1
        self._state.update(
            self.name, up=False, polls=(view.polls if view else 0) + 1,
            failed_polls=(view.failed_polls if view else 0) + 1, consecutive_failures=failures,
            last_poll_at_ms=int(now * 1000), last_error=reason, refused=refused,
        )
        if self._poller is not None and failures >= 3:
            # A fresh connection re-bootstraps: brokers may have moved while we were failing.
            self._close_poller()
        self._notify(None, None, reason, int(now * 1000))

    def _notify(self, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None,
                now_ms: int) -> None:
        for sink in self._sinks:
            streak = self._sink_streak(sink)
            try:
                sink.on_poll(self.name, snapshot, findings, error, now_ms)
            except Exception as exc:  # e.g. the database is down: the sink's own state says so, one line here
                streak.failed(exc, extra=self._log_context())
            else:
                streak.ok(extra=self._log_context())
        # The sinks have written this poll's rows: answers cached from before (serve/answer_cache.py) are stale.
        self._state.changed()

    def _sink_streak(self, sink: object) -> FailureStreak:
        name = type(sink).__name__
        if name not in self._sink_streaks:
            self._sink_streaks[name] = FailureStreak(log, f"cluster {self.name}: {name}")
        return self._sink_streaks[name]

    def _log_context(self) -> dict[str, object]:
        """Fields the JSON log format carries, so one poll's lines can be found together."""
        return {"cluster": self.name, "poll_id": self._poll_id}

    def _close_poller(self) -> None:
        poller, self._poller = self._poller, None
        if poller is not None:
            try:
                poller.close()
            except Exception:
                log.debug("closing poller of %s failed", self.name, exc_info=True)

    def close(self) -> None:
        self._close_poller()


THREAD_NAMES_EVERY_S = 30.0


class Collector:
    """Schedules every ClusterPollLoop on its own interval and thread."""

    def __init__(self, collectors: list[tuple[ClusterPollLoop, float]]) -> None:
        self._collectors = collectors
        workers = len(collectors) + 2  # side jobs get their own threads
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(max_workers=workers, pool_kwargs={
                "thread_name_prefix": "poll", "initializer": threadnames.name_current_from_python})},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
            timezone="UTC",
        )

    def start(self) -> None:
        for collector, interval in self._collectors:
            self._scheduler.add_job(collector.poll_once, "interval", seconds=interval, id=f"poll:{collector.name}",
                                    name=f"poll {collector.name}", next_run_time=_now())
        # Threads that libraries start (kafka-python's I/O loops, the scheduler's own) get OS names too; a
        # client's loop starts with its first request, so this looks again now and then (new threads only).
        self._scheduler.add_job(threadnames.name_threads, "interval", seconds=THREAD_NAMES_EVERY_S, id="thread-names",
                                name="thread-names", next_run_time=_now())
        self._scheduler.start()

    def add_job(self, func: Callable[[], object], seconds: float, job_id: str) -> None:
        """Side jobs (retention, outbox delivery) share the scheduler but not the cluster threads' timing.

        A side job that fails (the database is down) logs one line per streak instead of APScheduler's
        traceback on every run.
        """
        streak = FailureStreak(log, f"job {job_id}")

        def guarded() -> None:
            try:
                func()
            except Exception as exc:
                streak.failed(exc)
            else:
                streak.ok()

        self._scheduler.add_job(guarded, "interval", seconds=seconds, id=job_id, name=job_id, next_run_time=_now())

    def stop(self, wait: bool = True) -> None:
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)
        for collector, _ in self._collectors:
            collector.close()


def _now() -> datetime:
    from datetime import timezone

    return datetime.now(timezone.utc)
