"""The canary as a daemon service: one thread per enabled cluster, a round every ``interval_seconds``.

Its own threads, never the collector's: a round may wait seconds on a dead coordinator or leader (every step
is bounded by ``canary.timeout_ms``), and polls go on meanwhile.  ``stop`` wakes the threads and waits for the
current rounds; what a round holds is closed with it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from txnwatch.canary.probe import ClusterCanary
from txnwatch.core import threadnames

log = logging.getLogger(__name__)


class CanaryService:
    def __init__(self, canaries: Iterable[ClusterCanary]) -> None:
        self.canaries = {c.cluster: c for c in canaries}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._stop.clear()
        for canary in self.canaries.values():
            thread = threadnames.thread(self._run, f"canary-{canary.cluster}"[:15], args=(canary,))
            thread.start()
            self._threads.append(thread)
            log.info("canary of %s: a round every %gs on %s (transactional id %s)", canary.cluster,
                     canary.settings.interval_s, canary.settings.topic, canary.settings.transactional_id)

    def _run(self, canary: ClusterCanary) -> None:
        while not self._stop.is_set():
            try:
                canary.run_round()
            except Exception:
                log.exception("canary of %s: unexpected error", canary.cluster)
            self._stop.wait(canary.settings.interval_s)
        canary.close()

    def stop(self, timeout_s: float = 30.0) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout_s)
        self._threads.clear()
