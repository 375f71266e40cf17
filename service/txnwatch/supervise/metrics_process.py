"""The daemon's side of the metrics port: bind it, start txnwatch.serve.metrics_port, restart it when it dies.

The metrics port (``metrics.port``; by default ``api.port`` + 1) is served by a process of the standard
library only that sends the collector's latest render (see txnwatch.serve.metrics_port for why); the
API's port keeps serving ``/metrics`` too, from the daemon's (or an API worker's) interpreter.

Supervision as txnwatch.supervise.workers does it for API workers: a process that exits is started again,
with a growing pause if it keeps dying young; the kernel sends it SIGTERM when the thread that started
it (the supervisor's, which lives as long as the daemon) is gone; a clean stop sends SIGTERM.  The
supervising thread also reads the failed authentications the process reports, one line each, and adds
them to ``txnwatch_auth_failures_total``.
"""

from __future__ import annotations

import logging
import os
import resource
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CONTENT_TYPE_LATEST

from txnwatch import serve
from txnwatch.core import threadnames
from txnwatch.core.config import Settings
from txnwatch.serve.http_limits import connection_cap
from txnwatch.supervise.binding import StartupError, bind

if TYPE_CHECKING:
    from txnwatch.serve.api.throttle import FailureCounter

log = logging.getLogger(__name__)

#: Run by path: importing txnwatch would import pydantic & co.  It answers HTTP, so it lives in serve/.
SCRIPT = Path(serve.__file__).with_name("metrics_port.py")
RESTART_PAUSES_S = (1.0, 2.0, 5.0, 10.0, 30.0)
HEALTHY_AFTER_S = 60.0
STOP_TIMEOUT_S = 5.0


def metrics_port_of(settings: Settings) -> int | None:
    """The port the light server listens on; None when ``metrics.port`` is 0 (/metrics on the API port only)."""
    port = settings.metrics.port
    if port is None:
        return settings.api.port + 1 if settings.api.port < 65535 else None
    return port or None


def bind_metrics(settings: Settings) -> socket.socket | None:
    """The metrics port's listening socket, or None.  An explicit ``metrics.port`` that is taken stops the start
    (txnwatch.supervise.binding says why); the implicit ``api.port + 1`` that is taken only costs the fast path,
    with a warning: /metrics stays on the API port."""

    port = metrics_port_of(settings)
    if port is None:
        return None
    try:
        sock = bind(settings.api.host, port)
    except StartupError:
        if settings.metrics.port is not None:
            raise
        log.warning("the metrics port %d (api.port + 1) is taken: /metrics is served on the API port %d only, "
                    "from the daemon's process; set metrics.port to choose another", port, settings.api.port)
        return None
    sock.listen(1024)
    return sock


def config_lines(config: dict[str, object]) -> str:
    """What the process reads from stdin (txnwatch.serve.metrics_port.read_config): ``name<TAB>value`` lines; the
    token is visible ASCII (txnwatch.core.config.token_problem), so it holds no tab or newline."""
    return "".join(f"{name}\t{value}\n" for name, value in config.items())


class MetricsProcess:
    """Starts, watches (from its own thread) and stops the metrics port's process."""

    def __init__(self, settings: Settings, listener: socket.socket, directory: Path,
                 failures: FailureCounter | None = None) -> None:
        self._listener, self._directory, self._failures = listener, directory, failures
        api = settings.api
        token = api.read_token.get_secret_value() if api.read_token is not None else None
        cap = connection_cap(api.max_connections, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        self._config = config_lines({
            "read_token": token or "", "content_type": CONTENT_TYPE_LATEST, "max_connections": cap,
            "read_timeout_s": api.read_timeout_seconds, "keep_alive_s": api.keep_alive_timeout_seconds,
            "auth_failures_per_window": api.auth_failures_per_window,
            "auth_failure_window_s": api.auth_failure_window_seconds,
            "max_head_bytes": api.max_request_head_bytes, "max_header_fields": api.max_request_header_fields,
            "max_url_bytes": api.max_url_bytes})
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None else None

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    def start(self) -> None:
        self._stop.clear()
        self._thread = threadnames.thread(self._supervise, "metrics-port")
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S + 5)
            self._thread = None
        self._listener.close()

    def _spawn(self) -> subprocess.Popen[bytes]:
        fd = self._listener.fileno()
        # -I -S: no site packages, no PYTHON* variables, no script directory on the path: the standard library only.
        process = subprocess.Popen([sys.executable, "-I", "-S", str(SCRIPT), str(fd), str(self._directory),
                                    str(os.getpid())], pass_fds=(fd,), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   close_fds=True)
        assert process.stdin is not None
        process.stdin.write(self._config.encode())
        process.stdin.close()
        self.starts += 1
        return process

    def _supervise(self) -> None:
        failures = 0
        while not self._stop.is_set():
            started = time.monotonic()
            self._process = process = self._spawn()
            log.info("metrics port %d served by pid %d (standard library only)", self.port, process.pid)
            assert process.stdout is not None
            for line in process.stdout:  # failed authentications, until the process exits
                kind, _, result = line.decode("ascii", "replace").strip().partition(" ")
                if self._failures is not None and kind == "read" and result in ("refused", "throttled"):
                    self._failures.inc(kind, result)
            try:
                code = process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                code = process.wait()
            if self._stop.is_set():
                return
            lived_s = time.monotonic() - started
            failures = 0 if lived_s >= HEALTHY_AFTER_S else failures + 1
            pause_s = RESTART_PAUSES_S[min(failures, len(RESTART_PAUSES_S)) - 1] if failures else 0.0
            log.error("the metrics port's process (pid %d) exited with code %s after %.0fs; starting another in "
                      "%.0fs", process.pid, code, lived_s, pause_s)
            self._stop.wait(pause_s)
