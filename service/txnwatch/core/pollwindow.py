"""Polls in flight in this process; CPython's cyclic garbage collector waits while any runs.

A poll decodes thousands of broker answers into objects that live until the snapshot is
assembled, so CPython's generational GC fires again and again during it, and each full
(generation 2) collection walks every tracked object of the process.  Measured on a lab
cluster with 20,000 partitions, 20,000 group partitions and 20,000 transactional ids
(benchmarks/poll.py --daemon): about five full collections per poll, 0.7-0.9 s of a ~2 s poll in a
bare process, and more inside the daemon, whose heap holds the previous snapshot, the
detector state, the metrics registry and the web stack (issue 18: the poll ran 0.15 s alone
but 0.56 s in the daemon).  With the collector paused for the poll's duration it took half.

Nothing is lost by pausing: the poll's own garbage is almost all acyclic and freed by
reference counting as usual; cyclic garbage waits for the first collection after the poll,
which the normal thresholds trigger at once.  A poll is bounded by its request timeouts, so
the pause is too; polls of many clusters that overlap without a gap get a full collection from
the first poll to end after :data:`MAX_PAUSE_S`.  The GC is a property of the process, so the window is one per process
(:data:`PROCESS`), counted across the threads of every cluster's poll: the GC resumes when
the last poll in flight ends, and only if it was enabled when the first began.

The transaction-log tail pauses it the same way for each step (:meth:`PollWindow.batch`): a
fetch of up to 10,000 coordinator records becomes records, id states and transitions that live
until they are stored, and the collections they set off cost a fifth of the tail's CPU (issue
25, benchmarks/txnlog.py: 1.59 against 1.43 CPU-s for 102,342 records of a real log).

Work that can wait a few seconds and would otherwise hold the GIL against a poll (a /metrics
render of hundreds of thousands of series) can ask :meth:`PollWindow.wait_quiet` first.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

#: Polls of many clusters can overlap without a gap for a long time; cyclic garbage (exceptions with their
#: tracebacks, closed connections) must still be collected: once the GC has waited this long, the next poll
#: to end runs a full collection itself.
MAX_PAUSE_S = 60.0


class PollWindow:
    def __init__(self, max_pause_s: float = MAX_PAUSE_S) -> None:
        self._lock = threading.Condition()
        self._in_flight = 0  # polls
        self._holders = 0  # polls and batches: the GC waits for all of them
        self._resume_gc = False
        self._max_pause_s = max_pause_s
        self._paused_at = 0.0
        self.forced_collections = 0

    @property
    def polling(self) -> int:
        """Polls in flight now."""
        return self._in_flight

    @contextmanager
    def poll(self) -> Iterator[None]:
        """Around one poll: the first one in pauses the GC, the last one out resumes it."""
        with self._paused(1):
            yield

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Around one step of other bulk decoding (a transaction-log tail's fetch, apply and store): the GC
        waits as for a poll, but :meth:`wait_quiet` does not wait for it (a busy log's tail runs step after
        step, and a render must not wait on it for its whole ``max_wait_s``)."""
        with self._paused(0):
            yield

    @contextmanager
    def _paused(self, poll: int) -> Iterator[None]:
        with self._lock:
            if self._holders == 0:
                self._resume_gc = gc.isenabled()
                self._paused_at = time.monotonic()
                gc.disable()
            self._holders += 1
            self._in_flight += poll
        try:
            yield
        finally:
            collect = False
            with self._lock:
                self._holders -= 1
                self._in_flight -= poll
                if self._holders == 0:
                    if self._resume_gc:
                        gc.enable()
                elif self._resume_gc and time.monotonic() - self._paused_at >= self._max_pause_s:
                    collect, self._paused_at = True, time.monotonic()
                    self.forced_collections += 1
                if poll and self._in_flight == 0:
                    self._lock.notify_all()
            if collect:  # other polls still run: collect now rather than let cyclic garbage pile up
                gc.collect()

    def wait_quiet(self, max_wait_s: float) -> bool:
        """Until no poll runs, for at most ``max_wait_s`` (polls of many clusters may never leave a gap):
        True if quiet now."""
        with self._lock:
            return self._lock.wait_for(lambda: self._in_flight == 0, timeout=max_wait_s)


PROCESS = PollWindow()
"""The process's window: every ClusterPollLoop counts its polls here unless given another."""
