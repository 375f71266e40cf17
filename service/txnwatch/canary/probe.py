"""One cluster's canary round: a transaction per partition of its topic, each confirmed by a read_committed reader.

A round, in order: the topic (every broker leads a partition), the coordinator (FindCoordinator and the id's
``__transaction_state`` partition), then per partition begin → one record → commit acknowledged (the commit
latency) and the reader handed the record (the visibility latency: the LSO passed it).  Partitions go one after
the other, so each latency is that partition's alone.  The round becomes a
:class:`~txnwatch.core.canary.CanaryRound`, the pure rules (txnwatch.detect.canary) decide the finding, and the
round goes to the sinks (the metrics) and, as a :class:`~txnwatch.core.canary.CanaryView`, to ``publish`` (the
cluster's view, which the API and the console read).

A round never raises: a Kafka failure is a failed step (data); anything else (a bug, a client that cannot be
built) is logged, kept as ``last_error`` until a round succeeds, the calls are closed and made anew next round.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from txnwatch.core.canary import (
    CanaryAttempt,
    CanaryFailure,
    CanaryRound,
    CanaryStage,
    CanaryView,
    CoordinatorLocation,
    StepError,
)
from txnwatch.core.model import ErrorClass
from txnwatch.detect import canary as rules

log = logging.getLogger(__name__)


class CanaryCalls(Protocol):
    """What a round needs of Kafka (txnwatch.kafka.canary.CanaryClient); a fake in unit tests."""

    def ensure_topic(self) -> tuple[dict[int, int | None], StepError | None]: ...
    def locate(self) -> CoordinatorLocation: ...
    def commit(self, partition: int, payload: bytes) -> StepError | None: ...
    def read(self, partitions: tuple[int, ...], max_wait_ms: int) -> list[tuple[int, bytes]]: ...
    def close(self) -> None: ...


class RoundSink(Protocol):
    def on_round(self, cluster: str, round_: CanaryRound) -> None: ...


@dataclass(frozen=True, slots=True)
class ProbeSettings:
    topic: str
    transactional_id: str
    interval_s: float
    timeout_ms: int
    failures_to_alert: int


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _mono_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClusterCanary:
    """One cluster's canary: its calls, its rule state and the latest finding; only its own thread runs rounds."""

    def __init__(self, cluster: str, settings: ProbeSettings, connect: Callable[[], CanaryCalls],
                 sinks: Sequence[RoundSink] = (), *, leading: Callable[[], bool] = lambda: True,
                 publish: Callable[[CanaryView | None], object] = lambda view: None,
                 wall_ms: Callable[[], int] = _wall_ms, mono_ms: Callable[[], int] = _mono_ms) -> None:
        self.cluster = cluster
        self.settings = settings
        self._connect = connect
        self._sinks = tuple(sinks)
        self._leading = leading
        self._publish = publish
        self._wall_ms = wall_ms
        self._mono_ms = mono_ms
        self._calls: CanaryCalls | None = None
        self._state = rules.INITIAL
        self._book = rules.VisibilityBook()
        # Tokens name this process and a sequence, so a record of an earlier run is never taken for this one's.
        self._prefix = f"{os.getpid()}-{time.time_ns()}-"
        self._sequence = 0
        self._lock = threading.Lock()
        self.last_error: str | None = None
        self.last_round: CanaryRound | None = None

    @property
    def finding(self) -> CanaryFailure | None:
        """The open finding "transactions cannot commit", if any (read by the alert sink's thread)."""
        return self._state.finding

    def run_round(self) -> CanaryRound | None:
        """One round, or None when this replica does not lead the cluster (or the round could not run)."""
        with self._lock:
            if not self._leading():
                self._stand_down()
                return None
            try:
                round_ = self._round()
            except Exception as exc:
                self.last_error = f"{type(exc).__name__}: {exc}"[:500]
                log.warning("canary of %s: the round failed (%s); its connections are made anew next round",
                            self.cluster, self.last_error)
                self._close()
                self._publish_view()
                return None
            self._state = rules.advance(self._state, round_, self._wall_ms(), topic=self.settings.topic,
                                        failures_to_alert=self.settings.failures_to_alert)
            self.last_round = round_
            if round_.ok:
                self.last_error = None
            self._publish_view()
            for sink in self._sinks:
                try:
                    sink.on_round(self.cluster, round_)
                except Exception:
                    log.exception("canary of %s: a sink failed", self.cluster)
            return round_

    def close(self) -> None:
        with self._lock:
            self._close()

    def _stand_down(self) -> None:
        """Another replica leads the cluster: its canary fences ours; ours closes and forgets its finding."""
        self._close()
        if self._state is not rules.INITIAL or self.last_round is not None:
            self._publish(None)  # the replica that leads the cluster now shows its own
        self._state = rules.INITIAL
        self.last_round = None

    def _publish_view(self) -> None:
        try:
            self._publish(CanaryView(self.settings.transactional_id, self.settings.topic, self.settings.interval_s,
                                     self.last_round, self._state.finding, self.last_error))
        except Exception:
            log.exception("canary of %s: its view could not be published", self.cluster)

    def _close(self) -> None:
        calls, self._calls = self._calls, None
        if calls is not None:
            try:
                calls.close()
            except Exception as exc:
                log.debug("canary of %s: close: %s", self.cluster, exc)

    def _round(self) -> CanaryRound:
        at_ms = self._wall_ms()
        if self._calls is None:
            self._calls = self._connect()
        calls = self._calls
        leaders, topic_error = calls.ensure_topic()
        location = calls.locate()
        tid = self.settings.transactional_id
        if topic_error is not None or not leaders:
            error = topic_error or StepError(CanaryStage.TOPIC, "NO_PARTITIONS", ErrorClass.UNKNOWN,
                                             f"topic {self.settings.topic} has no partitions")
            return CanaryRound(at_ms, tid, location, (CanaryAttempt(None, None, error),))
        partitions = tuple(sorted(leaders))
        attempts: list[CanaryAttempt] = []
        for partition in partitions:
            attempt = self._attempt(calls, partitions, partition, leaders[partition])
            attempts.append(attempt)
            if attempt.error is not None and attempt.error.stage.needs_coordinator:
                break  # without a coordinator no other partition can commit: the round ends at its first try
        return CanaryRound(at_ms, tid, location, tuple(attempts))

    def _attempt(self, calls: CanaryCalls, partitions: tuple[int, ...], partition: int,
                 leader: int | None) -> CanaryAttempt:
        self._sequence += 1
        token = f"{self._prefix}{self._sequence}"
        calls.read(partitions, 0)  # the reader is placed (its first use) before the record exists
        began = self._mono_ms()
        error = calls.commit(partition, token.encode())
        acked = self._mono_ms()
        if error is not None:
            return CanaryAttempt(partition, leader, error)
        self._book.committed(token, partition, acked)
        visible = self._await(calls, partitions, token)
        if visible is None:
            return CanaryAttempt(partition, leader, StepError(
                CanaryStage.VISIBILITY, "NOT_VISIBLE", ErrorClass.UNKNOWN,
                f"committed, but a read_committed reader was not handed it within {self.settings.timeout_ms} ms "
                "(its markers are not written: the LSO did not pass it)"), commit_ms=acked - began)
        return CanaryAttempt(partition, leader, None, commit_ms=acked - began, visible_ms=visible)

    def _await(self, calls: CanaryCalls, partitions: tuple[int, ...], token: str) -> int | None:
        deadline = self._mono_ms() + self.settings.timeout_ms
        while True:
            now = self._mono_ms()
            found = None
            for _, value in calls.read(partitions, max(0, min(200, deadline - now))):
                seen = value.decode(errors="replace")
                latency = self._book.seen(seen, self._mono_ms())
                if seen == token:
                    found = latency
            if found is not None:
                return found
            now = self._mono_ms()
            if now >= deadline:
                self._book.expire(now, self.settings.timeout_ms)
                return None
