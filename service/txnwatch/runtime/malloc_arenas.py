"""glibc's malloc limited to two arenas in the daemon (``MALLOC_ARENA_MAX=2``) unless the environment says otherwise.

glibc gives each thread that allocates concurrently an arena of its own, up to 8 per core, and memory
freed in one arena is reused only by the threads allocating from it.  The daemon's threads take turns
building big, short-lived structures — the collector's poll (hundreds of MB of decoded answers at 80,000
partitions), the exposition's render, the store's writes, the API — so with one arena each every
thread keeps its own high-water mark resident.  With two arenas they reuse each other's freed memory: on
the 80,000-partition lab the daemon's peak RSS went from 677 to 590 MB over the same polls
(docs/performance.md).  Python objects under 512 bytes come from CPython's own allocator, which is
shared by all threads anyway, so the GIL-bound daemon loses no parallelism that it had.

An operator's ``MALLOC_ARENA_MAX`` wins (glibc has read it before any Python code runs).  Elsewhere than
glibc (musl, macOS) this does nothing.

Freed memory is also handed back after a /metrics render (:func:`heap_trimmer`, called by the exposition
thread through ``runtime/wiring``, when the RSS grew since the last trim): a poll's decoded answers and the render's temporaries leave free chunks
inside glibc's heap that ``free()`` alone keeps resident, because only the heap's top is returned
automatically.  ``malloc_trim(0)`` gives the free pages anywhere in the heap back to the kernel.  On issue 25's
lab (2,009 partitions, 12,015 group partitions) one call after the first polls took the daemon from 139.8 to
130.3 MB RSS (docs/performance.md, "Steady RSS on the peers lab").  An idle daemon that never polled has
nothing to give back (its memory is what it imported).
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable, MutableMapping

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2
ENV = "MALLOC_ARENA_MAX"


def limit_arenas(environ: MutableMapping[str, str] = os.environ, arenas: int = ARENAS) -> int | None:
    """Cap glibc's arenas for this process and its children; the cap set, or None if left as it was.

    Call it before the daemon starts threads: arenas already created stay.  The environment variable
    is set too, so the processes the daemon starts (API workers, archive jobs) get the same cap.
    """
    if ENV in environ or not sys.platform.startswith("linux"):
        return None
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no mallopt in this C library
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_ARENA_MAX, arenas) != 1:  # musl's mallopt is a stub that returns 0
        log.debug("mallopt(M_ARENA_MAX) refused; malloc arenas left as they are")
        return None
    environ[ENV] = str(arenas)
    return arenas


TRIM_GROWTH_BYTES = 2 << 20
""":func:`heap_trimmer` calls ``malloc_trim(0)`` only once the process's RSS has grown this much since the last trim
left it.  Trimming after every render cost the exposition thread ~0.05 CPU-s a minute on issue 25's peers lab (the
walk over every arena's free chunks and the ``madvise`` of their pages, each time, even of pages given back before),
as much as a fifth of its render work; a render that follows no growth has at most this much to give back."""


def _statm_rss_bytes() -> int | None:
    """The process's resident set (``/proc/self/statm``'s second field), or None where it cannot be read."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return None


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def heap_trimmer(growth_bytes: int = TRIM_GROWTH_BYTES,
                 rss_bytes: Callable[[], int | None] = _statm_rss_bytes) -> Callable[[], bool] | None:
    """glibc's ``malloc_trim(0)`` as a function (True when it released memory), or None without glibc.

    The function trims only when the RSS (``rss_bytes``) grew at least ``growth_bytes`` since the previous trim
    left it (or cannot be read): a render that follows no growth has little to give back (False, nothing called).
    ctypes releases the GIL around the call; glibc locks one arena at a time, so a thread allocating meanwhile
    waits at most for one arena's walk (a few milliseconds at the lab's ~40 MB heap)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # musl has no malloc_trim
        return None
    malloc_trim.argtypes, malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
    return _GatedTrim(lambda: bool(malloc_trim(0)), growth_bytes, rss_bytes)


class _GatedTrim:
    """``trim`` when the RSS grew ``growth_bytes`` since the last trim left it; one caller (the exposition thread)."""

    def __init__(self, trim: Callable[[], bool], growth_bytes: int, rss_bytes: Callable[[], int | None]) -> None:
        self._trim = trim
        self._growth = growth_bytes
        self._rss = rss_bytes
        self._floor: int | None = None  # the RSS right after the last trim; None: trim at the next call

    def __call__(self) -> bool:
        rss = self._rss()
        if rss is not None and self._floor is not None:
            self._floor = min(self._floor, rss)  # memory given back otherwise (munmap) lowers the mark
            if rss - self._floor < self._growth:
                return False
        released = self._trim()
        self._floor = self._rss()
        return released
