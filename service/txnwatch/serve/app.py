"""The FastAPI application: routers per resource, dependencies for DB, settings and state."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from txnwatch import __version__
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve import console
from txnwatch.serve.answer_cache import AnswerCache, AnswerCacheMiddleware
from txnwatch.serve.api.middleware import SecurityHeaders
from txnwatch.serve.api.routers import health, metrics
from txnwatch.serve.api.security import OPEN_PATHS, ReadTokenGuard
from txnwatch.serve.api.throttle import AuthThrottle

log = logging.getLogger(__name__)

def create_app(runtime: Runtime, *, manage_lifecycle: bool = True,
               clock: Callable[[], float] = time.time) -> FastAPI:
    """``clock`` (Unix seconds) is the console sessions' one: the login signs expiries with it, the guard checks
    them against it (tests pass their own)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if manage_lifecycle:
            runtime.start()
        try:
            yield
        finally:
            if manage_lifecycle:
                runtime.stop()

    app = FastAPI(
        title="txnwatch",
        version=__version__,
        description="Kafka transactions: open and hanging transactions, LSO stalls, coordinator history, "
                    "read_committed lag, KIP-890-style verification metrics.",
        lifespan=lifespan,
        docs_url=None,  # served offline from the vendored assets by txnwatch.serve.console.register_docs
        redoc_url=None,
    )
    app.state.runtime = runtime
    app.state.clock = clock
    # This process's windows of failed authentications per client (the guard's, the login's, the admin
    # check's: serve/api/throttle.py); what it counts goes to the runtime's txnwatch_auth_failures_total.
    api = runtime.settings.api
    app.state.auth_throttle = AuthThrottle(limit=api.auth_failures_per_window,
                                           window_s=api.auth_failure_window_seconds, metrics=runtime.auth_failures)

    # Added last = runs first: the body limit (413) comes before the token check (401), which comes before
    # the answer cache, routing and parsing.  The guard covers every path but the probes; see serve/api/security.py.
    # The console's login page and its static assets (public libraries, no data) are open; a browser without
    # the token is sent to the login page instead of a 401.
    # Inside the guard (added before it = runs after it): only requests the guard let through read the cache.
    app.state.answer_cache = None
    if api.answer_cache_bytes:
        app.state.answer_cache = AnswerCache(api.answer_cache_bytes, api.answer_cache_max_age_seconds)
        app.add_middleware(AnswerCacheMiddleware, cache=app.state.answer_cache)
    app.add_middleware(ReadTokenGuard, open_paths=OPEN_PATHS | {console.LOGIN}, open_prefixes=(console.STATIC + "/",),
                       login_path=console.LOGIN, clock=clock)
    app.add_middleware(SecurityHeaders)

    @app.exception_handler(SQLAlchemyError)
    async def database_unavailable(_: Request, exc: SQLAlchemyError) -> JSONResponse:
        kind = "unreachable" if isinstance(exc, OperationalError) else "error"
        log.warning("database %s while serving a request: %s", kind, str(exc).splitlines()[0])
        return JSONResponse({"detail": f"database {kind}; retry shortly"}, status_code=503,
                            headers={"Retry-After": "5"})

    app.include_router(health.router)
    app.include_router(metrics.router)
    from txnwatch.serve.api.routers import register

    register(app)
    console.register(app, console_enabled=runtime.settings.console.enabled)
    return app
