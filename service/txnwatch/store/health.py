"""The store's own health: whether its latest write succeeded, and how many polls it had to drop.

Written only by the :class:`~txnwatch.store.recorder.Recorder` (the one writer of
history) and the transaction-log tail's store writes (rejected objects), read by /readyz and exported as the store's own series.  It is a
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
        #: (kind, reason) -> objects the database refused one by one (issue 23: one tenant's bad object is set
        #: aside so everyone else's history is still written).
        self.rejected_objects: dict[tuple[str, str], int] = {}

    def write_failed(self, reason: str) -> None:
        self.ok, self.error = False, reason

    def write_succeeded(self) -> None:
        self.ok, self.error = True, None

    def dropped(self) -> None:
        with self._lock:
            self.dropped_observations += 1

    def rejected(self, kind: str, reason: str, count: int = 1) -> None:
        with self._lock:
            self.rejected_objects[(kind, reason)] = self.rejected_objects.get((kind, reason), 0) + count

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily("txnwatch_db_up", "1 if the latest database write succeeded.", labels=[])
        up.add_metric([], 1.0 if self.ok else 0.0)
        dropped = CounterMetricFamily("txnwatch_observations_dropped", "Polls dropped because the database was down "
                                      "longer than the in-memory buffer holds.", labels=[])
        dropped.add_metric([], self.dropped_observations)
        rejected = CounterMetricFamily("txnwatch_store_rejected_objects", "Objects (rows) the database refused "
                                       "and the store set aside so the rest of their write went through, by kind "
                                       "of object and database error.", labels=["kind", "reason"])
        with self._lock:
            counts = sorted(self.rejected_objects.items())
        for (kind, reason), count in counts:
            rejected.add_metric([kind, reason], count)
        yield from (up, dropped, rejected)
