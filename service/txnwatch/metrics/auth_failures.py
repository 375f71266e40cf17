"""``txnwatch_auth_failures_total{kind, result}``: failed authentications, counted where they happen.

The read-token guard, the console login and the admin check (txnwatch.serve.api.throttle) count each
failure as ``refused`` (a 401, a failed login) or ``throttled`` (answered 429 without a check).  The
counts live in shared memory when API worker processes serve (:func:`shared_counts`, handed to each
worker when it is spawned): the workers count, the collecting process renders /metrics and reads the
sum; a restarted worker adds to the same slots, so the counter never goes down.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

#: What a failure was: a read credential (bearer or session cookie), the console login form, the admin token.
KINDS = ("read", "login", "admin")
RESULTS = ("refused", "throttled")
_SLOTS = [(kind, result) for kind in KINDS for result in RESULTS]
_SLOT = {slot: index for index, slot in enumerate(_SLOTS)}


class AuthFailureMetrics(Collector):
    """The counter as a collector over ``counts`` (shared, or this process's own when ``None``); registered in
    the collecting process's registry only (``registry`` None in an API worker)."""

    def __init__(self, registry: CollectorRegistry | None, counts: Any = None) -> None:
        self._counts = counts if counts is not None else _LocalCounts(len(_SLOTS))
        if registry is not None:
            registry.register(self)

    @property
    def counts(self) -> Any:
        """The counts, for API worker processes to add to (a shared Array when built with one)."""
        return self._counts

    def inc(self, kind: str, result: str) -> None:
        with self._counts.get_lock():
            self._counts[_SLOT[kind, result]] += 1

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily("txnwatch_auth_failures", "Failed authentications by kind (read, login, "
                                     "admin) and result (refused: 401 or a failed login; throttled: 429, not "
                                     "checked).", labels=["kind", "result"])
        with self._counts.get_lock():
            values = list(self._counts)
        for (kind, result), value in zip(_SLOTS, values, strict=True):
            family.add_metric([kind, result], value)
        yield family


class _LocalCounts(list[int]):
    """The counts of a process that serves alone: the same interface as a shared Array, no shared memory (a
    multiprocessing lock would start Python's resource tracker process, ~10 MB, for nothing)."""

    def __init__(self, size: int) -> None:
        super().__init__([0] * size)
        self._lock = threading.Lock()

    def get_lock(self) -> threading.Lock:
        return self._lock


def shared_counts() -> Any:
    """One 64-bit count per (kind, result) in shared memory, handed to API worker processes when they are spawned."""
    return multiprocessing.get_context("spawn").Array("q", len(_SLOTS))
