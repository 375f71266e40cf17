"""Liveness and readiness, for Kubernetes probes and load balancers."""

from __future__ import annotations

import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text

from txnwatch.api.deps import RuntimeDep

router = APIRouter(tags=["health"])


@router.get("/healthz", summary="The process is alive")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", summary="DB reachable and every cluster polled successfully recently",
            responses={503: {"description": "Not ready; `reasons` says why"}})
def readyz(runtime: RuntimeDep) -> JSONResponse:
    reasons: list[str] = []
    try:
        with runtime.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        reasons.append(f"database unreachable: {str(exc).splitlines()[0]}")
    if runtime.state.db_error:
        reasons.append(f"database writes failing: {runtime.state.db_error}")
    now_ms = int(time.time() * 1000)
    for cluster in runtime.settings.clusters:
        view = runtime.state.get(cluster.name)
        stale_after_ms = int(3 * runtime.settings.interval_for(cluster) * 1000) + 30_000
        if view is None or view.last_success_at_ms is None:
            reasons.append(f"cluster {cluster.name}: not polled successfully yet"
                           + (f" ({view.last_error})" if view and view.last_error else ""))
        elif now_ms - view.last_success_at_ms > stale_after_ms:
            reasons.append(f"cluster {cluster.name}: last successful poll {(now_ms - view.last_success_at_ms) // 1000}s ago"
                           + (f" ({view.last_error})" if view.last_error else ""))
    body = {"status": "ready" if not reasons else "not ready", "reasons": reasons}
    return JSONResponse(body, status_code=200 if not reasons else 503)
