"""/metrics in the Prometheus text format, from in-memory state only."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from txnwatch.api.deps import RuntimeDep

router = APIRouter(tags=["metrics"])


@router.get("/metrics", summary="Prometheus metrics (see docs/metrics.md)", response_class=Response)
def metrics(runtime: RuntimeDep) -> Response:
    return Response(generate_latest(runtime.registry), media_type=CONTENT_TYPE_LATEST)
