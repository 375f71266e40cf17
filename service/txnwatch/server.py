"""`txnwatch run`: build the runtime and serve REST + /metrics with uvicorn."""

from __future__ import annotations

import logging

import uvicorn

from txnwatch import exitcodes, logs
from txnwatch.config import Settings

log = logging.getLogger(__name__)


class StartupError(Exception):
    """The daemon cannot start; the command turns it into one line on stderr and ``exit_code``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def serve(settings: Settings) -> None:
    from txnwatch.api.app import create_app
    from txnwatch.runtime import SchemaNotReady, ensure_schema
    from txnwatch.wiring import build_runtime

    logs.configure(settings.log_level, settings.log_format)
    try:
        ensure_schema(settings)
    except SchemaNotReady as exc:
        raise StartupError(str(exc), exitcodes.USAGE) from exc
    except Exception as exc:
        raise StartupError(f"cannot open the database: {str(exc).splitlines()[0]}", exitcodes.FOUND_OR_FAILED) from exc
    runtime = build_runtime(settings)
    app = create_app(runtime)
    log.info("txnwatch serving on http://%s:%d (REST /api/v1, /metrics, /docs) watching %d cluster(s)",
             settings.api.host, settings.api.port, len(settings.clusters))
    uvicorn.run(app, host=settings.api.host, port=settings.api.port, log_config=None,
                access_log=False, timeout_graceful_shutdown=20)
