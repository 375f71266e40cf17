"""/metrics rendered once per poll, not once per scrape, and kept as gzip bytes only.

The data behind /metrics changes once per poll, so rendering it on every scrape only
multiplies the cost by the number of scrapers (issue 18: 0.8–1.7 s per scrape at 37k
series).  Here a background thread renders the registry when the collector says a poll
finished (coalesced to at most one render per ``min_interval_s``) and at least every
``max_age_s`` (so figures that change between polls — outbox, leadership — follow).
A scrape takes the current render under a lock and never waits on Kafka, the database,
or a render.

Only the gzip of the render is kept, written as it is rendered (txnwatch.metrics.render): at
700,000 series the text is 67 MB and its gzip 2.4 MB, and Prometheus always asks for gzip.
The rare scrape that does not (curl without ``--compressed``) gets the text decompressed
for it, off the event loop; the bytes are the same either way.

A render formats and compresses only the families that changed since the previous one
(txnwatch.metrics.family_cache); the body is the same one gzip member either way.

Before the thread runs (runtimes built without services: tests, tools) a scrape renders
on demand, as prometheus-client's own handler does.
"""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol

from prometheus_client.registry import CollectorRegistry

from txnwatch.core import pollwindow, threadnames
from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot
from txnwatch.metrics.family_cache import FamilyCache
from txnwatch.metrics.render import render_text

log = logging.getLogger(__name__)


class ExpositionSource(Protocol):
    """What /metrics needs: this module's :class:`Exposition`, or an API worker's copy of the collector's render."""

    def cached(self, compressed: bool) -> bytes | None:
        """The body if it is ready to send as it is (no work on the event loop), else None: call :meth:`body`."""

    def body(self, compressed: bool) -> bytes:
        """The body, rendered or decompressed if need be (run it off the event loop)."""


class Exposition:
    def __init__(self, registry: CollectorRegistry, *, min_interval_s: float = 1.0, max_age_s: float = 15.0,
                 on_render: Callable[[bytes], None] | None = None) -> None:
        self._registry = registry
        self._on_render = on_render
        self._min_interval_s = min_interval_s
        self._max_age_s = max_age_s
        self._lock = threading.Lock()
        self._render_lock = threading.Lock()  # the family cache has one writer at a time (thread or on-demand scrapes)
        self._families = FamilyCache()
        self._rendered: bytes | None = None  # gzip
        self._rendered_at = 0.0
        self._render_s = 0.0
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def last_render_seconds(self) -> float:
        """Wall time of the latest render (text written into gzip), for benchmarks and logs."""
        return self._render_s

    def cached(self, compressed: bool) -> bytes | None:
        """The latest render (gzip) while the render thread runs; None when the scrape must call :meth:`body`."""
        rendered = self._rendered
        if rendered is None or self._thread is None or not compressed:
            return None
        return rendered

    def body(self, compressed: bool) -> bytes:
        """The exposition as bytes: the thread's render (decompressed for a scrape without gzip), else rendered now."""
        rendered = self._rendered
        if rendered is None or self._thread is None:
            return self.render() if compressed else render_text(self._registry)
        return rendered if compressed else gzip.decompress(rendered)

    @property
    def families(self) -> FamilyCache:
        """The per-family cache (how many families the latest render reused or formatted), for benchmarks."""
        return self._families

    def render(self) -> bytes:
        """Render the registry into gzip and keep it; returns the gzip bytes.

        Only families whose inputs changed since the previous render are formatted and compressed again
        (txnwatch.metrics.family_cache): an idle cluster's offsets and lags cost their collection only."""
        with self._render_lock:
            start = time.perf_counter()
            rendered = self._families.render_gzip(self._registry.collect())
            with self._lock:
                self._rendered, self._rendered_at = rendered, time.monotonic()
            self._render_s = time.perf_counter() - start
        return rendered

    def _render_and_hand_on(self) -> None:
        """The thread's render, handed to the API workers when there are (txnwatch.runtime.publication)."""
        compressed = self.render()
        if self._on_render is not None:
            self._on_render(compressed)

    def invalidate(self) -> None:
        """Something the exposition shows changed (a poll finished): render again soon."""
        self._dirty.set()

    def on_poll(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None,
                now_ms: int) -> None:
        """As the collector's last sink: every other sink has counted this poll by now."""
        self.invalidate()

    def start(self) -> None:
        self._stop.clear()
        self._thread = threadnames.thread(self._run, "exposition")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            # A render of hundreds of thousands of series holds the GIL for seconds: not during a poll, if the
            # polls leave a gap within max_age_s (txnwatch.core.pollwindow; polls of many clusters may never).
            pollwindow.PROCESS.wait_quiet(self._max_age_s)
            try:
                self._render_and_hand_on()
            except Exception:  # a broken collector must not stop the exposition; the last good render stays
                log.exception("rendering or publishing /metrics failed; serving the previous render")
            self._dirty.wait(self._max_age_s)
            self._stop.wait(self._min_interval_s)  # coalesce the polls of many clusters into one render
            self._dirty.clear()
