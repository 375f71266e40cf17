"""The store's own health: whether its latest write succeeded, and how many polls it had to drop.

Written only by the :class:`~txnwatch.store.recorder.Recorder` (the one writer of
history), read by /readyz and exported as the store's own series.  It is a
prometheus-client custom collector so the figures need no copy into shared state.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class StoreHealth(Collector):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.ok: bool = True
        self.error: str | None = None
        self.dropped_observations: int = 0

    def write_failed(self, reason: str) -> None:
        self.ok, self.error = False, reason

    def write_succeeded(self) -> None:
        self.ok, self.error = True, None

    def dropped(self) -> None:
        with self._lock:
            self.dropped_observations += 1

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("txnwatch_db_up", "1 if the latest database write succeeded.", labels=[])
        up.add_metric([], 1.0 if self.ok else 0.0)
        dropped = CounterMetricFamily("txnwatch_observations_dropped", "Polls dropped because the database was down "
                                      "longer than the in-memory buffer holds.", labels=[])
        dropped.add_metric([], self.dropped_observations)
        yield from (up, dropped)
