"""A log budget for outages: one line when a failure starts, one when it changes or ends, a reminder between.

A broker or the database being down is an expected state, not a bug: a line per poll (and a
traceback each) buried the one line that mattered — a 75 s PostgreSQL outage once wrote
880 KB of log with ~190 tracebacks.  A :class:`FailureStreak` per failing thing (a cluster,
a sink, the outbox loop) logs the start of a streak, a change of its reason, a reminder every
``reminder_s`` and the recovery, each as one line.  A traceback is logged only for an
*unexpected* exception (not a database, network or "cluster unreachable" error), once per
streak, because that one is a bug someone has to read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

REMINDER_S = 300.0
_EXPECTED_MODULES = ("sqlalchemy", "psycopg", "sqlite3", "kafka", "httpx", "httpcore")


def expected(exc: BaseException) -> bool:
    """Failures of something outside txnwatch (database, network, Kafka), as opposed to txnwatch's own bugs."""
    return (isinstance(exc, (OSError, TimeoutError)) or bool(getattr(exc, "cluster_unreachable", False))
            or type(exc).__module__.split(".")[0] in _EXPECTED_MODULES)


def describe(exc: BaseException) -> str:
    """One line: the class and the first line of the message (SQLAlchemy's messages run to dozens of lines)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class FailureStreak:
    """Log lines for one thing that fails and recovers; not thread-safe (each owner calls it from one thread)."""

    def __init__(self, logger: logging.Logger, what: str, *, reminder_s: float = REMINDER_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._what = what
        self._reminder_s = reminder_s
        self._clock = clock
        self._since: float | None = None
        self._kind: str | None = None
        self._last_line = 0.0
        self._count = 0
        self._traced = False

    @property
    def failing(self) -> bool:
        return self._since is not None

    def failed(self, failure: BaseException | str, *, extra: dict[str, object] | None = None,
               level: int = logging.WARNING) -> bool:
        """Record one failure; True if a line was logged for it."""
        now = self._clock()
        reason = failure if isinstance(failure, str) else describe(failure)
        # A change of kind (exception class), not of wording, is news: "broker 1 reset" vs "bootstrap failed".
        kind = failure if isinstance(failure, str) else type(failure).__name__
        self._count += 1
        trace_exc = failure if isinstance(failure, BaseException) and not expected(failure) else None
        trace = trace_exc is not None and not self._traced
        if self._since is None:
            self._since, self._kind, self._last_line = now, kind, now
            self._traced = trace
            self._log.log(level, "%s failing: %s", self._what, reason, exc_info=trace_exc if trace else None,
                          extra=extra)
            return True
        if kind != self._kind or trace:
            self._kind, self._last_line = kind, now
            self._traced = self._traced or trace
            self._log.log(level, "%s still failing, now: %s", self._what, reason,
                          exc_info=trace_exc if trace else None, extra=extra)
            return True
        if now - self._last_line >= self._reminder_s:
            self._last_line = now
            self._log.log(level, "%s still failing after %.0fs (%d failures): %s", self._what, now - self._since,
                          self._count, reason, extra=extra)
            return True
        return False

    def ok(self, *, extra: dict[str, object] | None = None) -> bool:
        """Record a success; logs the recovery once if a streak was open."""
        if self._since is None:
            return False
        self._log.info("%s recovered after %.0fs (%d failures)", self._what, self._clock() - self._since,
                       self._count, extra=extra)
        self._since, self._kind, self._count, self._traced = None, None, 0, False
        return True
