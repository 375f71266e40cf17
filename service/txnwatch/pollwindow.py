"""Polls in flight in this process; CPython's cyclic garbage collector waits while any runs.

A poll decodes thousands of broker answers into objects that live until the snapshot is
assembled, so CPython's generational GC fires again and again during it, and each full
(generation 2) collection walks every tracked object of the process.  Measured on a lab
cluster with 20,000 partitions, 20,000 group partitions and 20,000 transactional ids
(benchmarks/biglab.py): about five full collections per poll, 0.7-0.9 s of a ~2 s poll in a
bare process, and more inside the daemon, whose heap holds the previous snapshot, the
detector state, the metrics registry and the web stack (issue 18: the poll ran 0.15 s alone
but 0.56 s in the daemon).  With the collector paused for the poll's duration it took half.

Nothing is lost by pausing: the poll's own garbage is almost all acyclic and freed by
reference counting as usual; cyclic garbage waits for the first collection after the poll,
which the normal thresholds trigger at once.  A poll is bounded by its request timeouts, so
the pause is too.  The GC is a property of the process, so the window is one per process
(:data:`PROCESS`), counted across the threads of every cluster's poll: the GC resumes when
the last poll in flight ends, and only if it was enabled when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class PollWindow:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._resume_gc = False

    @property
    def polling(self) -> int:
        """Polls in flight now."""
        return self._in_flight

    @contextmanager
    def poll(self) -> Iterator[None]:
        """Around one poll: the first one in pauses the GC, the last one out resumes it."""
        with self._lock:
            if self._in_flight == 0:
                self._resume_gc = gc.isenabled()
                gc.disable()
            self._in_flight += 1
        try:
            yield
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0 and self._resume_gc:
                    gc.enable()


PROCESS = PollWindow()
"""The process's window: every ClusterCollector counts its polls here unless given another."""
