"""Limits of the HTTP server: a read deadline per request, a connection cap, the open-file limit (issue 23 item 4).

Why: 1,100 idle TCP connections from one client used to take the daemon down. Nothing closed a
connection that never sent a request, the process had the default 1,024 open files, so accept()
failed with EMFILE, `/healthz` timed out, the log filled with "Too many open files" and SQLite
could no longer open its file.

What uvicorn offers and why it is not enough on its own:

* ``timeout_keep_alive`` closes a connection idle *after a response*. A connection that never sends
  a request, or sends its head one byte at a time (slowloris), arms no timer at all, and the timer
  is cancelled by the first byte of the next request. h11 and httptools have no header timeout.
* ``limit_concurrency`` answers 503 to every new *request* once the number of open connections
  reaches the limit: under a flood of idle connections it refuses exactly the probes and scrapes
  that must keep working, and it never closes a connection.

So this module adds, around uvicorn's own protocol classes (httptools in the daemon and in the API
workers, h11 where asked), the two things an HTTP server in front of the internet has: Go's ``http.Server.ReadTimeout``
(the whole request, head and body, must arrive within ``read_timeout_s`` of the connection opening
or of the request's first byte) and nginx's answer to running out of connections (``ngx_drain_connections``
closes idle keep-alive connections to make room): when ``max_connections`` are open, the connection
that waited longest without a request in progress is closed for the new one. A probe on a fresh
connection therefore always gets in, while idle and half-sent connections are the ones that go.
Written by hand because uvicorn has no hook for either and no maintained ASGI server we could swap
in keeps the daemon's single-process, lean profile (hypercorn has read timeouts but no cap).

A request head's size, its header fields and its URL have a budget too (issue 38): ``serve/request_head.py``
around httptools, h11's own ``max_incomplete_event_size`` where h11 is asked for.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from txnwatch.serve.request_head import HeadLimits, budgeted

log = logging.getLogger(__name__)

#: File descriptors kept for everything but HTTP connections (database pool, Kafka connections, log files,
#: the publication directory): the connection cap is lowered to leave them (or a quarter of a smaller limit)
#: when the open-file limit is small.
RESERVED_FDS = 256
LOG_EVERY_S = 60.0


@dataclass(frozen=True)
class HttpLimits:
    max_connections: int
    read_timeout_s: float
    keep_alive_timeout_s: float
    head: HeadLimits = field(default_factory=HeadLimits)


def raise_open_files_limit() -> tuple[int, int]:
    """Soft RLIMIT_NOFILE up to the hard limit (the default soft 1,024 is a relic of select(); asyncio uses
    epoll). Returns (before, after); child processes (the API workers) inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft == hard or (soft != resource.RLIM_INFINITY and soft > hard):
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # a sandbox may forbid it: keep the soft limit, the cap adapts
        log.warning("cannot raise the open-file limit from %d to %d: %s", soft, hard, exc)
        return soft, soft
    return soft, hard


def connection_cap(configured: int, open_files: int) -> int:
    """``configured``, lowered if the open-file limit would not leave RESERVED_FDS (or a quarter of it) for the
    rest."""
    if open_files == resource.RLIM_INFINITY:
        return configured
    return max(1, min(configured, open_files - min(RESERVED_FDS, open_files // 4)))


class RateLimitedLog:
    """Counts events by kind and logs them at most once per ``every_s``, as one line with the counts."""

    def __init__(self, logger: logging.Logger, what: str, *, every_s: float = LOG_EVERY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log, self._what, self._every_s, self._clock = logger, what, every_s, clock
        self._counts: Counter[str] = Counter()
        self._last: float | None = None

    def count(self, kind: str) -> bool:
        """Count one event; True if a line was logged now."""
        self._counts[kind] += 1
        now = self._clock()
        if self._last is not None and now - self._last < self._every_s:
            return False
        since = "" if self._last is None else f" in the last {now - self._last:.0f}s"
        self._last = now
        counts = ", ".join(f"{n} {k}" for k, n in sorted(self._counts.items()))
        self._counts.clear()
        self._log.warning("%s%s: %s", self._what, since, counts)
        return True


class ConnectionGuard:
    """The open connections of one server (one event loop), oldest activity first; enforces the cap."""

    def __init__(self, limits: HttpLimits, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits
        self._open: OrderedDict[Any, None] = OrderedDict()
        self.closed = RateLimitedLog(log, "HTTP connections closed by the server's limits", clock=clock)

    def __len__(self) -> int:
        return len(self._open)

    def opened(self, connection: Any) -> None:
        """Admit ``connection``; past the cap, close the longest-waiting idle one (or this one, if every other
        connection has a request in progress)."""
        self._open[connection] = None
        if len(self._open) <= self.limits.max_connections:
            return
        victim = next((c for c in self._open if c is not connection and c.waiting()), connection)
        self.closed.count("at the connection cap" if victim is not connection else "refused, all busy")
        # Out of the count now: its connection_lost comes a loop iteration later, after the rest of a burst.
        del self._open[victim]
        victim.close_now()

    def active(self, connection: Any) -> None:
        """``connection`` finished a response: it is now the newest to wait."""
        if connection in self._open:
            self._open.move_to_end(connection)

    def lost(self, connection: Any) -> None:
        self._open.pop(connection, None)


def guarded(base: type[asyncio.Protocol], guard: ConnectionGuard) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's protocol ``base`` (H11Protocol or HttpToolsProtocol) under ``guard``'s limits.

    The read deadline runs from the connection's opening, or from the first byte of its next request (the
    wait between requests is uvicorn's ``timeout_keep_alive``), to the end of the request's body.

    It relies on what both implementations share: ``self.cycle`` (a new RequestResponseCycle per request,
    with ``more_body`` and ``response_complete``), ``self.transport``, ``self.loop`` and
    ``on_response_complete``; tests/test_http_limits.py runs against both."""
    timeout_s = guard.limits.read_timeout_s

    class Guarded(base):  # type: ignore[valid-type,misc]  # a class built at run time over uvicorn's protocol
        _deadline: asyncio.TimerHandle | None = None
        _armed_for: Any = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self._arm()
            guard.opened(self)

        def connection_lost(self, exc: Exception | None) -> None:
            guard.lost(self)
            self._disarm()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            # The first byte of the next request on a kept-alive connection starts its read deadline (uvicorn's
            # keep-alive timer, which bounded the wait for it, stops at that byte).
            if self._deadline is None and self.waiting():
                self._arm()
            super().data_received(data)

        def on_response_complete(self) -> None:
            self._disarm()
            super().on_response_complete()
            guard.active(self)

        def waiting(self) -> bool:
            """No request in the application: nothing received yet, the previous response sent, or a head or
            body still arriving."""
            cycle = self.cycle
            return cycle is None or cycle.response_complete or cycle.more_body

        def close_now(self) -> None:
            if not self.transport.is_closing():
                self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._armed_for = self.cycle
            self._deadline = self.loop.call_later(timeout_s, self._expired)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expired(self) -> None:
            self._deadline = None
            cycle = self.cycle
            # No request head since the deadline was armed (no new cycle), or its body still arriving.
            if cycle is self._armed_for or (cycle.more_body and not cycle.response_complete):
                guard.closed.count("read timeout")
                self.close_now()

    Guarded.__name__ = Guarded.__qualname__ = f"Guarded{base.__name__}"
    return Guarded


ACCEPT_FAILED = "socket.accept() out of system resource"


def quiet_accept_errors(loop: asyncio.AbstractEventLoop, *, every_s: float = LOG_EVERY_S) -> None:
    """asyncio logs a traceback for each failed accept() (EMFILE, ENFILE, ENOBUFS) and retries a second later:
    count them and log one line a minute instead; every other error goes to the default handler."""
    accept_errors = RateLimitedLog(log, "accept() failed, new connections wait in the listen backlog",
                                   every_s=every_s)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if str(context.get("message", "")).startswith(ACCEPT_FAILED):
            exc = context.get("exception")
            accept_errors.count(getattr(exc, "strerror", None) or type(exc).__name__)
            return
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)


def base_protocol(http: str) -> type[asyncio.Protocol]:
    """uvicorn's protocol class for ``http`` ("h11", "httptools" or "auto": httptools when importable)."""
    from uvicorn.config import HTTP_PROTOCOLS
    from uvicorn.importer import import_from_string

    protocol: type[asyncio.Protocol] = import_from_string(HTTP_PROTOCOLS[http])
    return protocol


#: How often the server's main loop wakes when nothing asks it to (uvicorn: 0.1 s).
TICK_S = 1.0


def make_server(app: Any, limits: HttpLimits, *, http: str, loop: str, **options: Any) -> Any:
    """A uvicorn server for ``app`` under ``limits`` (``options``: more of uvicorn.Config's, e.g. proxy headers);
    run it with ``.run(sockets=[listener])``."""
    import uvicorn

    guard = ConnectionGuard(limits)
    base = base_protocol(http)
    if hasattr(base, "on_headers_complete"):  # httptools' callbacks: uvicorn's HttpToolsProtocol (also "auto")
        base = budgeted(base, limits.head, guard.closed.count)
    else:  # h11 refuses a head above its buffer itself (400, not 431), and keeps no partial header list
        options.setdefault("h11_max_incomplete_event_size", limits.head.max_head_bytes)

    class LimitedServer(uvicorn.Server):
        _nudge: asyncio.Event | None = None
        _loop: asyncio.AbstractEventLoop | None = None

        async def startup(self, sockets: Any = None) -> None:
            quiet_accept_errors(asyncio.get_running_loop())
            await super().startup(sockets)

        async def main_loop(self) -> None:
            """uvicorn's loop, ticking every ``TICK_S`` instead of every 0.1 s (issue 25: ten wake-ups a second
            were most of the idle daemon's main thread).  A tick refreshes the Date header (uvicorn does that
            once a second too) and checks ``should_exit``; a shutdown signal nudges the loop at once
            (:meth:`handle_exit`), so stopping is as prompt as before."""
            self._loop, self._nudge = asyncio.get_running_loop(), asyncio.Event()
            counter = 0
            should_exit = await self.on_tick(counter)
            while not should_exit:
                counter = (counter + 10) % 864000  # a multiple of 10: every tick refreshes the Date header
                try:
                    await asyncio.wait_for(self._nudge.wait(), TICK_S)
                except TimeoutError:
                    pass
                should_exit = await self.on_tick(counter)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            loop, nudge = self._loop, self._nudge
            if loop is not None and nudge is not None and not loop.is_closed():
                loop.call_soon_threadsafe(nudge.set)

    # timeout_keep_alive is typed int in uvicorn but only handed to loop.call_later: a float is fine.
    config = uvicorn.Config(app, log_config=None, access_log=False, timeout_graceful_shutdown=20, loop=loop,
                            http=guarded(base, guard),
                            timeout_keep_alive=limits.keep_alive_timeout_s,  # type: ignore[arg-type]
                            **options)
    return LimitedServer(config)
