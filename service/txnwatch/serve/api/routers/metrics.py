"""/metrics in the Prometheus text format: bytes rendered once per poll, gzip when the scraper accepts it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Response
from fastapi.concurrency import run_in_threadpool
from prometheus_client import CONTENT_TYPE_LATEST

from txnwatch.runtime.publication import NotPublishedYet
from txnwatch.serve.api.deps import RuntimeDep
from txnwatch.serve.metrics_port import accepts_gzip

router = APIRouter(tags=["metrics"])


@router.get("/metrics", summary="Prometheus metrics (see docs/metrics.md)", response_class=Response)
async def metrics(runtime: RuntimeDep, accept_encoding: Annotated[str | None, Header()] = None) -> Response:
    compressed = accepts_gzip(accept_encoding)
    # Served from the render the collector triggers after each poll; rendered here only if none runs (tests, tools).
    body = runtime.exposition.cached(compressed)
    if body is None:
        try:
            body = await run_in_threadpool(runtime.exposition.body, compressed)
        except NotPublishedYet as exc:  # an API worker in the seconds before the collector's first render
            return Response(f"{exc}; retry shortly\n", status_code=503, media_type="text/plain",
                            headers={"Retry-After": "5"})
    headers = {"Vary": "Accept-Encoding"}
    if compressed:
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers=headers)
