"""Answers of the list endpoints cached per published generation, as plain ASGI (issue 25: cheap API reads).

A list page costs 4–5 ms of API CPU (routing, dependencies, SQL, rows to JSON) although what it shows only
changes when a poll publishes: the collector's views and the rows its sinks write.  So a GET of a list endpoint
is answered from memory when the same question was answered under the same *generation*
(``LatestState.generation``, bumped by every poll's publication, again once its sinks have written, by a
transaction-log tail's update and, in an API worker, by every reload of the collector's publication).

The key is ``(path, normalised query, auth scope, generation)``:

* the query is normalised by sorting on parameter names only, so ``a=1&b=2`` and ``b=2&a=1`` share an entry
  while repeated values (``state=Ongoing&state=Empty``) and a repeated single-valued parameter (FastAPI takes
  the last) keep their order;
* the auth scope: this middleware sits *inside* the read-token guard (serve/api/security.py), so only requests
  the guard let through get here, and every reader shares one scope (one read token; the admin routes are not
  cached at all).  A future per-reader scope goes into :func:`auth_scope`.

Also bounded in time: an entry older than ``max_age_s`` (``api.answer_cache_max_age_seconds``, 1 s) is not
served.  An entry that is asked for past :data:`REFRESH_AT` of that age is served and recomputed in the
background (single flight), so under steady traffic no request waits for an answer to age out: at 200 req/s
over nine endpoints, those expiries alone made ~9 requests a second (4.5 %) wait for a recomputation, which set
the p99 (issue 25).  Nothing is served older than before; an entry nobody asks for is never recomputed.  That bounds what no generation sees: ``age_seconds`` fields computed at the answer's time, rows a
transaction-log tail wrote between two publications an API worker reloads, a recorder that commits after the
poll's sinks returned.

What polls write is cached: transactions (the list, not one id's page), hanging, LSO stalls, partitions,
consumer groups, clusters and alerts (alert rows are written by the evaluator, one of a poll's sinks, before the
poll loop bumps the generation; the outbox writes its own table, which no alert answer shows), and verification
(samples written by a poll's sinks, the brokers' figures of the latest poll; its window ends at the answer's
time, which the max age bounds as it bounds ``age_seconds``).  The reports (``/api/v1/reports/...``) are cached
too: the pipeline writes them once per run from another process, which no generation sees, so a new run's rows
show at most ``max_age_s`` late; without the cache every report page cost ~3 ms of API CPU even when empty
(issue 25: every list endpoint ≤ 1 ms per request).  One id's page, the admin routes and the console are always
computed.  Only whole 200 answers of at most ``max_entry_bytes`` are kept; memory is an LRU under a byte budget
(``api.answer_cache_bytes``; 0 turns the cache off).  One cache per serving process, used on its event loop only
(no lock).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from txnwatch.runtime.lifecycle import Runtime

log = logging.getLogger(__name__)

#: Exact paths whose answers depend only on what polls write (see the module docstring for the others).
CACHED_PATHS = frozenset({
    "/api/v1/transactions", "/api/v1/hanging", "/api/v1/lso-stalls", "/api/v1/partitions",
    "/api/v1/consumer-groups", "/api/v1/clusters", "/api/v1/alerts", "/api/v1/verification",
})
#: Path prefixes whose every answer is cached: the pipeline's reports, one route per cluster and rollup.
CACHED_PREFIXES = ("/api/v1/reports/",)
#: Share of the max age after which a requested entry is recomputed in the background while still served.
REFRESH_AT = 0.75
#: Bytes an entry costs beyond its key and body (the tuple, the headers list, the dict slot): an estimate that
#: keeps the budget honest for many small answers.
ENTRY_OVERHEAD_BYTES = 512

Key = tuple[str, str, str, int]


@dataclass(frozen=True)
class Answer:
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    created_s: float
    size: int


class AnswerCache:
    """An LRU of answers under a byte budget; :meth:`get` refuses an entry older than ``max_age_s``."""

    def __init__(self, budget_bytes: int, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.budget_bytes = budget_bytes
        self.max_entry_bytes = budget_bytes // 8  # one huge page never empties the cache for the rest
        self.max_age_s = max_age_s
        self._clock = clock
        self._entries: OrderedDict[Key, Answer] = OrderedDict()
        self.used_bytes = 0
        self.hits = self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Key) -> Answer | None:
        answer = self._entries.get(key)
        if answer is None or self._clock() - answer.created_s > self.max_age_s:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return answer

    def due(self, answer: Answer) -> bool:
        """True when a served answer should be recomputed before it ages out (see :data:`REFRESH_AT`)."""
        return self._clock() - answer.created_s >= self.max_age_s * REFRESH_AT

    def put(self, key: Key, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> Answer | None:
        """Keeps the answer and returns it, or None when it is too big to keep."""
        size = len(body) + sum(len(k) + len(v) for k, v in headers) + len(key[0]) + len(key[1]) + ENTRY_OVERHEAD_BYTES
        if size > self.max_entry_bytes:
            return None
        old = self._entries.pop(key, None)
        if old is not None:
            self.used_bytes -= old.size
        self._entries[key] = answer = Answer(status, tuple(headers), body, self._clock(), size)
        self.used_bytes += size
        while self.used_bytes > self.budget_bytes:
            _, evicted = self._entries.popitem(last=False)
            self.used_bytes -= evicted.size
        return answer


def normalised_query(raw: bytes) -> str:
    """The query string with parameters ordered by name; values of one name keep their order (sort is stable)."""
    if not raw:
        return ""
    pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True)
    return urlencode(sorted(pairs, key=lambda pair: pair[0]))


def auth_scope(scope: Scope) -> str:
    """Every request that passed the read-token guard reads the same data (one read token)."""
    return "reader"


class AnswerCacheMiddleware:
    """Serves cached answers of :data:`CACHED_PATHS`; computes and keeps them otherwise.

    Concurrent misses of one key are computed once (single flight): when a generation moves or an entry ages
    out under load, the requests that arrive while the first is being computed wait for its answer instead of
    each running the query (measured by benchmarks/api.py at 200 req/s: without this, every expiry sent a burst
    of identical queries to the database and exhausted its connection pool)."""

    def __init__(self, app: ASGIApp, *, cache: AnswerCache, paths: frozenset[str] = CACHED_PATHS,
                 prefixes: tuple[str, ...] = CACHED_PREFIXES) -> None:
        self.app = app
        self.cache = cache
        self.paths = paths
        self.prefixes = prefixes
        self._in_flight: dict[Key, asyncio.Future[Answer | None]] = {}
        self._refreshing: set[asyncio.Task[None]] = set()  # held until done (the loop keeps only weak references)

    def cached(self, path: str) -> bool:
        return path in self.paths or path.startswith(self.prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or not self.cached(scope["path"]):
            await self.app(scope, receive, send)
            return
        runtime: Runtime = scope["app"].state.runtime
        runtime.refresh()  # an API worker reloads the collector's publication here (one stat)
        key = (scope["path"], normalised_query(scope.get("query_string", b"")), auth_scope(scope),
               runtime.state.generation)
        answer = self.cache.get(key)
        if answer is not None and key not in self._in_flight and self.cache.due(answer):
            self._refresh(key, dict(scope))  # before answering: the request's scope is still untouched
        if answer is None and key in self._in_flight:
            answer = await asyncio.shield(self._in_flight[key])  # the first one's answer (None: not keepable)
        if answer is not None:
            await send({"type": "http.response.start", "status": answer.status, "headers": list(answer.headers)})
            await send({"type": "http.response.body", "body": answer.body})
            return
        flight: asyncio.Future[Answer | None] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = flight
        try:
            await self._compute(key, scope, receive, send, flight)
        finally:
            if self._in_flight.get(key) is flight:
                del self._in_flight[key]
            if not flight.done():
                flight.set_result(None)  # the waiters compute their own

    def _refresh(self, key: Key, scope: Scope) -> None:
        """Recompute ``key`` in the background as the request that found it aging would have; requests that find
        the entry gone meanwhile wait for this flight, as for any other."""
        flight: asyncio.Future[Answer | None] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = flight
        task = asyncio.ensure_future(self._in_background(key, scope, flight))
        self._refreshing.add(task)
        task.add_done_callback(self._refreshing.discard)

    async def _in_background(self, key: Key, scope: Scope, flight: asyncio.Future[Answer | None]) -> None:
        asked = False

        async def receive() -> Message:
            nonlocal asked
            if asked:
                return {"type": "http.disconnect"}
            asked = True
            return {"type": "http.request", "body": b"", "more_body": False}

        async def nowhere(message: Message) -> None:
            pass

        try:
            await self._compute(key, scope, receive, nowhere, flight)
        except Exception:
            log.debug("refreshing the cached answer of %s failed; the next request computes it", key[0],
                      exc_info=True)
        finally:
            if self._in_flight.get(key) is flight:
                del self._in_flight[key]
            if not flight.done():
                flight.set_result(None)

    async def _compute(self, key: Key, scope: Scope, receive: Receive, send: Send,
                       flight: asyncio.Future[Answer | None]) -> None:
        start: Message | None = None
        chunks: list[bytes] = []

        async def keep(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and start is not None and start["status"] == 200:
                    headers = list(start.get("headers", []))
                    body = b"".join(chunks)
                    kept = self.cache.put(key, 200, headers, body)
                    if kept is not None and not flight.done():
                        flight.set_result(kept)
            await send(message)

        await self.app(scope, receive, keep)
