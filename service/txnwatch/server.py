"""`txnwatch run`: build the runtime and serve REST + /metrics with uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from txnwatch import logs
from txnwatch.config import Settings

log = logging.getLogger(__name__)


def serve(settings: Settings) -> None:
    from txnwatch.api.app import create_app
    from txnwatch.cli import fail
    from txnwatch.runtime import SchemaNotReady, build_runtime, ensure_schema

    logs.configure(settings.log_level, settings.log_format)
    try:
        ensure_schema(settings)
    except SchemaNotReady as exc:
        fail(str(exc))
    except Exception as exc:
        fail(f"cannot open the database: {str(exc).splitlines()[0]}", 1)
    runtime = build_runtime(settings)
    app = create_app(runtime)
    log.info("txnwatch serving on http://%s:%d (REST /api/v1, /metrics, /docs) watching %d cluster(s)",
             settings.api.host, settings.api.port, len(settings.clusters))
    uvicorn.run(app, host=settings.api.host, port=settings.api.port, log_config=None,
                access_log=False, timeout_graceful_shutdown=20)
