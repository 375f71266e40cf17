"""The uvicorn server of every serving process (the daemon's own, each API worker's): its parser, loop, HTTP
limits and proxy options, from the settings."""

from __future__ import annotations

import logging
import resource
from typing import Any

from txnwatch.core.config import Settings
from txnwatch.serve.http_limits import HttpLimits, connection_cap
from txnwatch.serve.request_head import HeadLimits

log = logging.getLogger(__name__)

# The daemon's own API server: the standard asyncio loop (uvloop costs ~11 MB of RSS, and the daemon's
# requests share the GIL with polls anyway) and httptools' C parser, which costs less RSS than h11's
# pure-Python one (~0.9 MB against ~2.7 MB imported) and less CPU per request (issue 25: cheap API reads,
# measured by benchmarks/api.py).  API workers take uvloop and httptools ("auto").
DAEMON_HTTP = "httptools"
DAEMON_LOOP = "asyncio"


def http_limits(settings: Settings) -> HttpLimits:
    """The API's limits for one serving process, the connection cap fitted to this process's open-file limit."""
    api = settings.api
    cap = connection_cap(api.max_connections, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    if cap < api.max_connections:
        log.warning("api.max_connections %d lowered to %d: the open-file limit is %d", api.max_connections, cap,
                    resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    return HttpLimits(cap, api.read_timeout_seconds, api.keep_alive_timeout_seconds, head_limits(settings))


def head_limits(settings: Settings) -> HeadLimits:
    """A request head's budget on every port (the metrics port's process gets the same figures)."""
    api = settings.api
    return HeadLimits(api.max_request_head_bytes, api.max_request_header_fields, api.max_url_bytes)


def proxy_options(settings: Settings) -> dict[str, Any]:
    """uvicorn's proxy options from ``api.trusted_proxies``, for the daemon's server and the API workers'.

    uvicorn believes X-Forwarded-For/-Proto only from the addresses in ``forwarded_allow_ips``: the client
    address failed logins are counted against (txnwatch.serve.api.throttle) and the scheme that makes the console
    cookie Secure come from them.  Passed explicitly, so uvicorn's FORWARDED_ALLOW_IPS variable no longer
    applies; the config (and the chart) is the one place that says which proxies are trusted."""
    proxies = settings.api.trusted_proxies
    return {"proxy_headers": bool(proxies), "forwarded_allow_ips": list(proxies)}
