"""The daemon's ASGI application: the probes answered at once, the API stack loaded on the first other request.

Kubernetes asks ``/healthz`` and ``/readyz`` every 10 s (helm/txnwatch: the API port, 8080), and that is all most
daemons are ever asked on that port: Prometheus scrapes the metrics port's own process (serve/metrics_port.py).
FastAPI, starlette, the API's pydantic models, its routers and the console cost 16 MB of RSS and PSS once
imported and built (issue 25, idle RSS; ``benchmarks/lean_daemon.py``).  So :class:`Front`, which
:func:`daemon_app` builds for uvicorn, answers a plain ``GET /healthz`` or ``GET /readyz`` itself, from
txnwatch.serve.readiness, the computation the API's own routes use, with the same status, body and headers;
every other request (any other path or method, a probe with a body, a probe whose computation raised) goes to
the API application, built by the given factory the first time one arrives, while the probes go on being
answered.  The front also runs the runtime's lifespan (start, then stop), as the API application's lifespan does
when it is served alone (API workers, tests).

It imports neither starlette nor FastAPI: plain ASGI messages, as uvicorn sends them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve.readiness import ALIVE, readiness
from txnwatch.serve.security_headers import SECURITY_HEADERS

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEALTHZ, READYZ = "/healthz", "/readyz"
_EXTRA_HEADERS = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in SECURITY_HEADERS.items()]


def json_answer(status: int, body: object) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, headers and bytes as the API answers JSON: starlette's JSONResponse rendering (compact, UTF-8),
    its two headers, then serve/api/middleware.SecurityHeaders' four."""
    content = json.dumps(body, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()
    headers = [(b"content-length", str(len(content)).encode()), (b"content-type", b"application/json"),
               *_EXTRA_HEADERS]
    return status, headers, content


def is_plain_probe(scope: Scope) -> bool:
    """A GET of a probe path without a request body: the requests the front answers itself."""
    if scope["method"] != "GET" or scope["path"] not in (HEALTHZ, READYZ):
        return False
    headers = dict(scope["headers"])
    return b"transfer-encoding" not in headers and headers.get(b"content-length", b"0") == b"0"


class Front:
    """The probes, the runtime's lifespan, and the API application built on first use (see the module)."""

    def __init__(self, runtime: Runtime, build_api: Callable[[], ASGIApp]) -> None:
        self.runtime = runtime
        self._build_api = build_api
        self._api: ASGIApp | None = None
        self._building: asyncio.Lock | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] == "http" and is_plain_probe(scope):
            answer = await self._probe(scope["path"])
            if answer is not None:
                status, headers, body = answer
                await send({"type": "http.response.start", "status": status, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        api = self._api if self._api is not None else await self._load_api()
        await api(scope, receive, send)

    async def _probe(self, path: str) -> tuple[int, list[tuple[bytes, bytes]], bytes] | None:
        if path == HEALTHZ:
            return json_answer(200, ALIVE)
        try:
            # In a worker thread, as the API's sync route runs: it asks the database.
            return json_answer(*await asyncio.get_running_loop().run_in_executor(None, readiness, self.runtime))
        except Exception:
            return None  # the API application answers it, with its own error handling

    async def _load_api(self) -> ASGIApp:
        """Builds the API application once, in a worker thread (its imports take a while: the event loop goes on
        answering the probes and the connections meanwhile); requests arriving during the build wait for it."""
        if self._building is None:
            self._building = asyncio.Lock()
        async with self._building:
            if self._api is None:
                started = time.perf_counter()
                self._api = await asyncio.get_running_loop().run_in_executor(None, self._build_api)
                log.info("API loaded on its first request in %.2f s", time.perf_counter() - started)
        return self._api

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        """The runtime started before the server accepts connections and stopped after it closed them, with the
        ASGI lifespan protocol's messages as starlette sends them (a failed start stops uvicorn)."""
        started = False
        await receive()
        try:
            self.runtime.start()
            try:
                await send({"type": "lifespan.startup.complete"})
                started = True
                await receive()
            finally:
                self.runtime.stop()
        except BaseException:
            text = traceback.format_exc()
            await send({"type": "lifespan.shutdown.failed" if started else "lifespan.startup.failed",
                        "message": text})
            raise
        else:
            await send({"type": "lifespan.shutdown.complete"})


def daemon_app(runtime: Runtime) -> Front:
    """What the daemon's own server runs (``api.workers: 0``): the front, which runs the runtime's lifespan and
    answers the probes, and builds the API application (txnwatch.serve.app.create_app, not imported until
    then) on the first request for anything else (the module's docstring says why)."""

    def build_api() -> Any:
        from txnwatch.serve.app import create_app

        return create_app(runtime, manage_lifecycle=False)  # the front runs the lifespan

    return Front(runtime, build_api)
