"""Failed authentication, rate-limited per client: a 429 after N failures in a window, one log line, a counter.

Without it, hundreds of wrong tokens per second reached the login, the bearer check and the admin
token, without a delay or a line in the log.  Now every failure (a wrong bearer, a forged session
cookie, a wrong login, a wrong or missing admin token) is counted against its client in a fixed
window; once a client has failed ``limit`` times in its window, every request of it that needs a
credential is answered 429 with ``Retry-After`` until the window ends, the right token included
(else a guesser would learn from a success among the 429s).

* **Client**: the address uvicorn reports, i.e. the peer, or the X-Forwarded-For client when the peer
  is one of ``api.trusted_proxies``.  IPv6 clients count per /64, the smallest network one host is
  usually given, so rotating addresses inside it does not reset the count.
* **Bounded memory**: at most ``max_clients`` windows are kept (least recently failed evicted first),
  whatever the number of addresses an attacker rotates through; ~200 bytes each.
* **Bounded log**: one line per client per window (its first failure), and at most
  ``max_lines_per_window`` lines a window over all clients; what was left out is said in the next line.
* **Bounded audit**: callers that audit (admin) are told to write a row for the first ``limit`` failures
  of a client's window, at most ``max_audits_per_window`` over all clients.

The windows are per process: with ``api.workers: N`` each worker keeps its own (a client whose connections
reach several workers gets up to N times the limit), as does each replica.  The counter is shared by the
workers (txnwatch.metrics.auth_failures).
"""

from __future__ import annotations

import ipaddress
import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

log = logging.getLogger("txnwatch.auth")

MAX_CLIENTS = 10_000
MAX_LINES_PER_WINDOW = 20
MAX_AUDITS_PER_WINDOW = 100


def client_key(host: str | None) -> str:
    """The address failures are counted against: IPv4 as it is, IPv6 by its /64."""
    if not host:
        return "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host[:64]  # not an IP (a unix socket's name): bounded, counted as is
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return str(address)


@dataclass(slots=True)
class _Window:
    start: float
    failures: int = 0


@dataclass(frozen=True, slots=True)
class Failure:
    """What the caller does about one failure: ``audit`` a row (admin), ``retry_after_s`` if now throttled."""

    audit: bool
    retry_after_s: int | None


class _Budget:
    """N events per window over all clients; says how many were suppressed since the last one allowed."""

    def __init__(self, per_window: int, window_s: float) -> None:
        self.per_window, self.window_s = per_window, window_s
        self.start, self.used, self.suppressed = -math.inf, 0, 0

    def take(self, now: float) -> int | None:
        """None if over budget; else how many were suppressed before this one."""
        if now - self.start >= self.window_s:
            self.start, self.used = now, 0
        if self.used >= self.per_window:
            self.suppressed += 1
            return None
        self.used += 1
        suppressed, self.suppressed = self.suppressed, 0
        return suppressed


class FailureCounter(Protocol):
    """Where failures are counted: txnwatch.metrics.auth_failures.AuthFailureMetrics (the runtime's)."""

    def inc(self, kind: str, result: str) -> None: ...


class AuthThrottle:
    """One per process; the API's guard, the console login and the admin check share it."""

    def __init__(self, *, limit: int, window_s: float, metrics: FailureCounter | None = None,
                 max_clients: int = MAX_CLIENTS, max_lines_per_window: int = MAX_LINES_PER_WINDOW,
                 max_audits_per_window: int = MAX_AUDITS_PER_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window_s, self.max_clients = limit, window_s, max_clients
        self._metrics = metrics
        self._clock = clock
        self._windows: OrderedDict[str, _Window] = OrderedDict()
        self._lines = _Budget(max_lines_per_window, window_s)
        self._audits = _Budget(max_audits_per_window, window_s)
        self._lock = threading.Lock()  # the admin check runs in the threadpool, the guard on the event loop

    def __len__(self) -> int:
        return len(self._windows)

    def blocked(self, client: str, kind: str) -> int | None:
        """Seconds until ``client`` may try again if it is throttled now (the attempt is counted), else None."""
        with self._lock:
            now = self._clock()
            window = self._current(client, now)
            if window is None or window.failures < self.limit:
                return None
            retry_after = max(1, math.ceil(window.start + self.window_s - now))
        self._count(kind, "throttled")
        return retry_after

    def failed(self, client: str, kind: str, what: str) -> Failure:
        """Records a failure of ``client``; ``what`` says which credential failed, for the log line."""
        with self._lock:
            now = self._clock()
            window = self._current(client, now)
            if window is None:
                window = self._windows[client] = _Window(now)
                while len(self._windows) > self.max_clients:
                    self._windows.popitem(last=False)
            else:
                self._windows.move_to_end(client)
            window.failures += 1
            first = window.failures == 1
            suppressed = self._lines.take(now) if first else None
            audit = window.failures <= self.limit and self._audits.take(now) is not None
            throttled = window.failures >= self.limit
            retry_after = max(1, math.ceil(window.start + self.window_s - now)) if throttled else None
        self._count(kind, "refused")
        if suppressed is not None:
            log.warning("authentication failed from %s: %s; after %d failures in %.0fs its requests are answered "
                        "429 until the window ends (further failures in this window are counted in "
                        "txnwatch_auth_failures_total, not logged)%s", client, what, self.limit, self.window_s,
                        f"; {suppressed} such lines about other clients left out" if suppressed else "")
        return Failure(audit, retry_after)

    def _current(self, client: str, now: float) -> _Window | None:
        window = self._windows.get(client)
        if window is not None and now - window.start >= self.window_s:
            del self._windows[client]
            return None
        return window

    def _count(self, kind: str, result: str) -> None:
        if self._metrics is not None:
            self._metrics.inc(kind, result)
