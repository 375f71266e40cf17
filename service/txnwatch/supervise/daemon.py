"""`txnwatch run`: take the ports, check the schema, then serve from this process or from API workers.

The order is the point: the ports are bound before the database is opened and the schema is checked
before anything is built, so each failure is told at once, in one line with its own exit code
(:class:`~txnwatch.supervise.binding.StartupError`).  With ``api.workers: 0`` this process collects and
serves (uvicorn runs the front: txnwatch.serve.front.daemon_app); with ``api.workers: N`` it collects and
txnwatch.supervise.workers serves.  Either way the metrics port has its own process
(txnwatch.supervise.metrics_process).
"""

from __future__ import annotations

import gc
import logging
import sys

from txnwatch.core import exitcodes, logs
from txnwatch.core.config import Settings
from txnwatch.serve.http_limits import make_server, raise_open_files_limit
from txnwatch.supervise.binding import StartupError, bind
from txnwatch.supervise.server import DAEMON_HTTP, DAEMON_LOOP, http_limits, proxy_options

log = logging.getLogger(__name__)

#: How long a thread may hold the GIL while another waits for it, in the daemon's process (CPython's default is
#: 5 ms).  The API's event loop releases the GIL at every socket call and must win it back each time: while the
#: poll, the render or the transaction-log tail computes, each of those waits lasted up to 5 ms, and a request
#: makes several (issue 25: p99 at 200 req/s).  At 1 ms the loop waits at most 1 ms each time; a switch costs
#: microseconds, so the computing threads lose well under 1 %.
SWITCH_INTERVAL_S = 0.001


def serve(settings: Settings) -> None:
    """Run the daemon until SIGTERM or SIGINT; :class:`StartupError` when it cannot start or stops on a failure."""
    from txnwatch.runtime.lifecycle import SchemaNotReady, ensure_schema
    from txnwatch.store.db import database_problems

    logs.configure(settings.log_level, settings.log_format)
    problems = database_problems(settings.database_url)
    if problems:
        raise StartupError(f"database_url: {problems[0]}", exitcodes.USAGE)
    from txnwatch.supervise.metrics_process import MetricsProcess, bind_metrics

    listener = bind(settings.api.host, settings.api.port)
    try:
        metrics_listener = bind_metrics(settings)
    except StartupError:
        listener.close()
        raise
    try:
        ensure_schema(settings)
    except SchemaNotReady as exc:
        raise StartupError(str(exc), exitcodes.USAGE) from exc
    except Exception as exc:
        raise StartupError(f"cannot open the database: {str(exc).splitlines()[0]}", exitcodes.FOUND_OR_FAILED) from exc
    before, after = raise_open_files_limit()
    if after != before:
        log.info("open-file limit raised from %d to %d", before, after)
    if settings.api.workers:
        from txnwatch.supervise.workers import run_with_workers

        try:
            run_with_workers(settings, listener, metrics_listener)
        except Exception as exc:
            raise StartupError(f"the daemon stopped: {exc}", exitcodes.FOUND_OR_FAILED) from exc
        return
    from txnwatch.runtime.publication import make_directory, remove_directory
    from txnwatch.runtime.wiring import build_runtime
    from txnwatch.serve.front import daemon_app

    directory = make_directory() if metrics_listener is not None else None
    runtime = build_runtime(settings, metrics_to=directory)
    app = daemon_app(runtime)
    gc.freeze()  # start-up objects out of the cyclic collector's sight (as in txnwatch.supervise.workers.worker_main)
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # the API shares this process's GIL with the collector's threads
    metrics = (MetricsProcess(settings, metrics_listener, directory, runtime.auth_failures)
               if metrics_listener is not None and directory is not None else None)
    log.info("txnwatch serving on http://%s:%d (REST /api/v1, /metrics, /docs)%s watching %d cluster(s)",
             settings.api.host, settings.api.port,
             f" and /metrics on http://{settings.api.host}:{metrics.port}" if metrics is not None else "",
             len(settings.clusters))
    server = make_server(app, http_limits(settings), http=DAEMON_HTTP, loop=DAEMON_LOOP, **proxy_options(settings))
    if metrics is not None:
        metrics.start()
    try:
        server.run(sockets=[listener])
    finally:
        if metrics is not None:
            metrics.stop()
        if directory is not None:
            remove_directory(directory)
    if not server.started:
        raise StartupError("the API server did not start (its reason is logged above)", exitcodes.FOUND_OR_FAILED)
