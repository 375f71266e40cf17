"""What /healthz and /readyz answer: one computation for the API's routes (serve/api/routers/health.py) and the
daemon's front (serve/front.py), which answers the probes without loading the API stack."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import select, text

from txnwatch.core.epoch import to_ms
from txnwatch.core.redact import redact
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.store.models import Cluster

#: /healthz's one answer.
ALIVE: dict[str, str] = {"status": "ok"}


def readiness(runtime: Runtime) -> tuple[int, dict[str, Any]]:
    """/readyz's status code and body: the database reachable and every cluster polled successfully within
    3 poll intervals + 30 s (by this replica for the clusters it holds, by their holder's rows otherwise)."""
    reasons: list[str] = []
    try:
        with runtime.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:
        reasons.append(f"database unreachable: {str(exc).splitlines()[0]}")
    reasons.extend(runtime.collector_problems())
    if runtime.store_health.error:
        reasons.append(f"database writes failing: {runtime.store_health.error}")
    leading = runtime.leadership.is_leader()
    held = {c.name for c in runtime.settings.clusters if runtime.leadership.holds(c.name)}
    own = _last_polls(runtime)
    others = _last_polls_from_db(runtime) if len(held) < len(runtime.settings.clusters) else {}
    now_ms = int(time.time() * 1000)
    for cluster in runtime.settings.clusters:
        polls = own if cluster.name in held else others
        last_success_ms, last_error = polls.get(cluster.name, (None, None))
        stale_after_ms = int(3 * runtime.settings.interval_for(cluster) * 1000) + 30_000
        why = f" ({last_error})" if last_error else ""
        if last_success_ms is None:
            reasons.append(f"cluster {cluster.name}: not polled successfully yet{why}")
        elif now_ms - last_success_ms > stale_after_ms:
            reasons.append(f"cluster {cluster.name}: last successful poll {(now_ms - last_success_ms) // 1000}s ago{why}")
    # Polling is a working fallback, not a reason to be unready; say which mode each cluster is in.
    history = {v.name: {"mode": v.history.mode, "reason": v.history.reason} for v in runtime.state.views()}
    body = {"status": "ready" if not reasons else "not ready", "role": "leader" if leading else "follower",
            "clusters_held": sorted(held), "reasons": [redact(r) for r in reasons], "history": history}
    return (200 if not reasons else 503), body


def _last_polls(runtime: Runtime) -> dict[str, tuple[int | None, str | None]]:
    """A holder knows its own clusters' polls, even while the database is down."""
    return {v.name: (v.last_success_at_ms, v.last_error) for v in runtime.state.views()}


def _last_polls_from_db(runtime: Runtime) -> dict[str, tuple[int | None, str | None]]:
    """Clusters another replica holds are judged by what their holder wrote."""
    try:
        with runtime.sessions() as session:
            rows = session.execute(select(Cluster.name, Cluster.last_success_at, Cluster.last_error)).all()
    except Exception:
        return {}
    return {name: (to_ms(at) if at else None, error) for name, at, error in rows}
