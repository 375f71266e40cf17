"""`txnwatch run`: build the runtime and serve REST + /metrics with uvicorn."""

from __future__ import annotations

import gc
import logging
import resource
import socket
import sys
from typing import TYPE_CHECKING, Any

from txnwatch.core import exitcodes, logs
from txnwatch.core.config import Settings
from txnwatch.core.redact import redact
from txnwatch.serve.http_limits import HttpLimits, connection_cap, make_server, raise_open_files_limit

if TYPE_CHECKING:
    from txnwatch.runtime.lifecycle import Runtime
    from txnwatch.serve.front import Front

log = logging.getLogger(__name__)

# The daemon's own API server: the standard asyncio loop (uvloop costs ~11 MB of RSS, and the daemon's
# requests share the GIL with polls anyway) and httptools' C parser, which costs less RSS than h11's
# pure-Python one (~0.9 MB against ~2.7 MB imported) and less CPU per request (issue 25: cheap API reads,
# measured by benchmarks/api.py).  API workers take uvloop and httptools ("auto").
DAEMON_HTTP = "httptools"
DAEMON_LOOP = "asyncio"
#: How long a thread may hold the GIL while another waits for it, in the daemon's process (CPython's default is
#: 5 ms).  The API's event loop releases the GIL at every socket call and must win it back each time: while the
#: poll, the render or the transaction-log tail computes, each of those waits lasted up to 5 ms, and a request
#: makes several (issue 25: p99 at 200 req/s).  At 1 ms the loop waits at most 1 ms each time; a switch costs
#: microseconds, so the computing threads lose well under 1 %.
SWITCH_INTERVAL_S = 0.001


class StartupError(Exception):
    """The daemon cannot start; the command turns it into one line on stderr and ``exit_code`` (URL passwords
    masked: the reason often quotes a driver's error)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(redact(message))
        self.exit_code = exit_code


def bind(host: str, port: int) -> socket.socket:
    """Take the API's port first, before the database and Kafka: a port in use is told at once, with its own
    exit code, instead of after the start-up work (uvicorn alone would exit 3, like an unreachable cluster)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise StartupError(f"api.host {host!r} cannot be resolved: {exc.strerror}", exitcodes.USAGE) from exc
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; another process may hold the "
                           f"port: choose another with --port, api.port or TXNWATCH_API__PORT",
                           exitcodes.PORT_UNAVAILABLE) from exc
    return sock


def http_limits(settings: Settings) -> HttpLimits:
    """The API's limits for one serving process, the connection cap fitted to this process's open-file limit."""
    api = settings.api
    cap = connection_cap(api.max_connections, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    if cap < api.max_connections:
        log.warning("api.max_connections %d lowered to %d: the open-file limit is %d", api.max_connections, cap,
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    return HttpLimits(cap, api.read_timeout_seconds, api.keep_alive_timeout_seconds)


def proxy_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's proxy options from ``api.trusted_proxies``, for the daemon's server and the API workers'.

    uvicorn believes X-Forwarded-For/-Proto only from the addresses in ``forwarded_allow_ips``: the client
    address failed logins are counted against (txnwatch.serve.api.throttle) and the scheme that makes the console
    cookie Secure come from them.  Passed explicitly, so uvicorn's FORWARDED_ALLOW_IPS variable no longer
    applies; the config (and the chart) is the one place that says which proxies are trusted."""
    proxies = settings.api.trusted_proxies
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": list(proxies)}


def daemon_app(runtime: Runtime) -> Front:
    """What the daemon's own server runs (``api.workers: 0``): the front, which runs the runtime's lifespan and
    answers the probes, and builds the API application (txnwatch.serve.app.create_app, not imported until
    then) on the first request for anything else (serve/front.py says why)."""
    from txnwatch.serve.front import Front

    def build_api() -> Any:
        from txnwatch.serve.app import create_app

        return create_app(runtime, manage_lifecycle=False)  # the front runs the lifespan

    return Front(runtime, build_api)


def serve(settings: Settings) -> None:
    from txnwatch.runtime.lifecycle import SchemaNotReady, ensure_schema
    from txnwatch.store.db import database_problems

    logs.configure(settings.log_level, settings.log_format)
    problems = database_problems(settings.database_url)
    if problems:
        raise StartupError(f"database_url: {problems[0]}", exitcodes.USAGE)
    from txnwatch.serve.metrics_process import MetricsProcess, bind_metrics

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
        from txnwatch.serve.workers import run_with_workers

        try:
            run_with_workers(settings, listener, metrics_listener)
        except Exception as exc:
            raise StartupError(f"the daemon stopped: {exc}", exitcodes.FOUND_OR_FAILED) from exc
        return
    from txnwatch.runtime.publication import make_directory, remove_directory
    from txnwatch.runtime.wiring import build_runtime

    directory = make_directory() if metrics_listener is not None else None
    runtime = build_runtime(settings, metrics_to=directory)
    app = daemon_app(runtime)
    gc.freeze()  # start-up objects out of the cyclic collector's sight (as in txnwatch.serve.workers.worker_main)
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
