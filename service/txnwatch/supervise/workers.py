"""``api.workers`` ≥ 1: the daemon's process collects, N worker processes serve the API and /metrics.

Why processes: a poll of a big cluster, its detection and the /metrics render hold the GIL for
seconds, and a request served by the same interpreter waits for it (issue 18: scrape p99 396 ms
at 49k series while polling; the list endpoints topped out at ~100 req/s on one core).  Workers
have interpreters of their own: they read the database with their own pools and the collector's
in-memory facts from what it publishes after each render (txnwatch.runtime.publication).

The supervision is written here rather than taken from uvicorn's ``--workers``: uvicorn's
supervisor builds the app from an import string in each child, while ours needs the parent's
validated ``Settings`` and publication directory, must keep the collector's services running in
the parent, and must not leave workers behind when the collector dies (``PR_SET_PDEATHSIG``).
A worker that dies is started again, with a growing pause if it keeps dying.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import multiprocessing
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import FrameType
from typing import Any

from txnwatch.core.config import Settings

log = logging.getLogger(__name__)

SPAWN = multiprocessing.get_context("spawn")  # never fork a process whose threads hold locks
RESTART_PAUSES_S = (1.0, 2.0, 5.0, 10.0, 30.0)
HEALTHY_AFTER_S = 60.0  # a worker that lived this long restarts without a pause next time
STOP_TIMEOUT_S = 25.0
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Linux: the kernel sends SIGTERM when the thread that started us exits (the collector's main thread)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the parent's stop() still terminates us
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os._exit(0)


def worker_main(settings: Settings, listener: socket.socket, directory: str, parent_pid: int,
                auth_counts: Any = None) -> None:
    """Entry point of one API worker process (spawned, so this runs in a fresh interpreter)."""
    die_with_parent(parent_pid)
    from txnwatch.core import logs
    from txnwatch.runtime.wiring import build_api_runtime
    from txnwatch.serve.app import create_app
    from txnwatch.serve.http_limits import make_server, raise_open_files_limit
    from txnwatch.supervise.server import http_limits, proxy_options

    logs.configure(settings.log_level, settings.log_format)
    raise_open_files_limit()  # inherited from the collector already; again in case a worker is started alone
    runtime = build_api_runtime(settings, Path(directory), auth_counts)
    app = create_app(runtime, manage_lifecycle=False)
    # What exists now (modules, the app, its routes and schemas: ~150,000 objects) lives as long as the
    # process: out of the cyclic collector's sight, a full collection scans only what requests left behind.
    # It took ~200 ms with them, long enough to set the p99 of requests at 200 req/s (docs/performance.md).
    gc.freeze()
    # loop/http "auto": uvloop and httptools (dependencies) when importable, asyncio and h11 otherwise.
    server = make_server(app, http_limits(settings), http="auto", loop="auto", **proxy_options(settings))
    try:
        server.run(sockets=[listener])
    finally:
        runtime.engine.dispose()


@dataclass
class _Slot:
    index: int
    process: BaseProcess | None = None
    started_at: float = 0.0
    failures: int = 0
    restart_at: float = 0.0


class WorkerPool:
    """Starts, watches and stops the worker processes; all from the main thread (see die_with_parent)."""

    def __init__(self, settings: Settings, listener: socket.socket, directory: Path, count: int,
                 auth_counts: Any = None) -> None:
        self._settings, self._listener, self._directory = settings, listener, directory
        self._auth_counts = auth_counts
        self._slots = [_Slot(i) for i in range(count)]

    def pids(self) -> list[int]:
        return [s.process.pid for s in self._slots if s.process is not None and s.process.pid is not None]

    def start(self) -> None:
        for slot in self._slots:
            self._spawn(slot)

    def _spawn(self, slot: _Slot) -> None:
        process = SPAWN.Process(target=worker_main, name=f"txnwatch-api-{slot.index}",
                                args=(self._settings, self._listener, str(self._directory), os.getpid(),
                                      self._auth_counts))
        process.start()
        slot.process, slot.started_at = process, time.monotonic()
        log.info("API worker %d started (pid %s)", slot.index, process.pid)

    def check(self) -> None:
        """Restart workers that exited, pausing longer each time one keeps dying young."""
        now = time.monotonic()
        for slot in self._slots:
            process = slot.process
            if process is not None and process.is_alive():
                continue
            if process is not None:
                lived_s = now - slot.started_at
                slot.failures = 0 if lived_s >= HEALTHY_AFTER_S else slot.failures + 1
                pause_s = RESTART_PAUSES_S[min(slot.failures, len(RESTART_PAUSES_S) - 1)] if slot.failures else 0.0
                log.error("API worker %d (pid %s) exited with code %s after %.0fs; starting another in %.0fs",
                          slot.index, process.pid, process.exitcode, lived_s, pause_s)
                process.close()
                slot.process, slot.restart_at = None, now + pause_s
            if now >= slot.restart_at:
                self._spawn(slot)

    def stop(self) -> None:
        """SIGTERM (uvicorn finishes the requests in flight), then SIGKILL for any worker still there."""
        running = [s.process for s in self._slots if s.process is not None]
        for process in running:
            if process.is_alive():
                process.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        for process in running:
            process.join(max(0.0, deadline - time.monotonic()))
            if process.is_alive():
                log.warning("API worker pid %s did not stop in %.0fs; killing it", process.pid, STOP_TIMEOUT_S)
                process.kill()
                process.join(5)
        for slot in self._slots:
            slot.process = None


def run_with_workers(settings: Settings, listener: socket.socket, metrics_listener: socket.socket | None = None, *,
                     check_every_s: float = 1.0) -> None:
    """The daemon with API workers: services here, HTTP there, until SIGTERM or SIGINT.

    Raises :class:`RuntimeError` when a service fails to start (the caller turns it into an exit code)."""
    from txnwatch.runtime.publication import make_directory, remove_directory
    from txnwatch.runtime.wiring import build_runtime
    from txnwatch.supervise.metrics_process import MetricsProcess

    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; stopping the API workers, then the services", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    directory = make_directory()
    runtime = build_runtime(settings, publish_to=directory)
    # The workers count failed authentications in shared memory, this process renders them.
    pool = WorkerPool(settings, listener, directory, settings.api.workers, runtime.auth_failures.counts)
    metrics = (MetricsProcess(settings, metrics_listener, directory, runtime.auth_failures)
               if metrics_listener is not None else None)
    try:
        runtime.start()
        pool.start()
        if metrics is not None:
            metrics.start()
        log.info("txnwatch serving on http://%s:%d with %d API worker process(es) (pids %s); this process "
                 "(pid %d) collects", settings.api.host, settings.api.port, settings.api.workers,
                 ", ".join(map(str, pool.pids())), os.getpid())
        while not stop.wait(check_every_s):
            pool.check()
    finally:
        if metrics is not None:
            metrics.stop()
        pool.stop()
        runtime.stop()
        remove_directory(directory)
        listener.close()
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        log.info("txnwatch stopped")
