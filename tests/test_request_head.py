"""A request head's budget (issue 38 item 1): on the API port (uvicorn with httptools, the daemon's asyncio and the
workers' "auto"), and on the metrics port's process, a head above ``max_head_bytes``, with too many header fields
or too long a URL is answered 431 (414) and closed before more of it is buffered.

Before: httptools kept every ``a:b`` line a client sent within the read deadline; four such connections took the
daemon from 82 to 844 MB in nine seconds.
"""

from __future__ import annotations

import gzip
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txnwatch.core.config import load_settings
from txnwatch.runtime.publication import MetricsFile
from txnwatch.serve.http_limits import HttpLimits, make_server
from txnwatch.serve.request_head import HeadLimits
from txnwatch.supervise.binding import bind
from txnwatch.supervise.metrics_process import MetricsProcess
from txnwatch.supervise.server import http_limits

HEAD = HeadLimits(max_head_bytes=16 * 1024, max_header_fields=100, max_url_bytes=8 * 1024)
FLOOD_S = 3.0


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture(params=[pytest.param(("httptools", "asyncio"), id="daemon-httptools"),
                        pytest.param(("auto", "auto"), id="worker-auto")])
def api_port(request: pytest.FixtureRequest) -> Iterator[int]:
    http, loop = request.param
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    limits = HttpLimits(max_connections=50, read_timeout_s=30, keep_alive_timeout_s=5, head=HEAD)
    server = make_server(_app, limits, http=http, loop=loop, lifespan="off")
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield listener.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def metrics_port(tmp_path: Path) -> Iterator[int]:
    settings = load_settings(None, database_url="sqlite://", clusters=[{"name": "a", "bootstrap_servers": ["h:9"]}],
                             api={"host": "127.0.0.1", "port": 18080, "read_timeout_seconds": 30})
    listener = bind("127.0.0.1", 0)
    listener.listen(64)
    process = MetricsProcess(settings, listener, tmp_path)
    MetricsFile(tmp_path).publish(gzip.compress(b"up 1\n"))
    process.start()
    deadline = time.monotonic() + 15
    while _status(_ask(process.port, b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")) != 200:
        assert time.monotonic() < deadline, "the metrics port did not start"
        time.sleep(0.1)
    try:
        yield process.port
    finally:
        process.stop()


def _ask(port: int, request: bytes) -> bytes:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(request)
            return _read_all(sock)
    except OSError:
        return b""


def _read_all(sock: socket.socket) -> bytes:
    answer = b""
    try:
        while chunk := sock.recv(65536):  # every request here ends its connection
            answer += chunk
    except (TimeoutError, ConnectionResetError):
        pass
    return answer


def _status(answer: bytes) -> int | None:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.") else None


def _flood(port: int, seconds: float = FLOOD_S) -> tuple[bytes, int, bool]:
    """``GET /healthz`` then ``a:b`` lines as fast as the server takes them: (its answer, bytes sent, closed)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: flood\r\n")
    lines, sent, answer, closed = b"a:b\r\n" * 1000, 0, b"", False
    sock.setblocking(False)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not closed:
        try:
            sent += sock.send(lines)
        except BlockingIOError:
            time.sleep(0.01)
        except (BrokenPipeError, ConnectionResetError):
            closed = True
        try:
            chunk = sock.recv(65536)
            answer += chunk
            closed = closed or not chunk
        except BlockingIOError:
            pass
        except ConnectionResetError:
            closed = True
    sock.close()
    return answer, sent, closed


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_an_endless_head_is_answered_431_and_closed_without_growing(api_port: int) -> None:
    before = _rss_mb()
    floods = [_flood(api_port, FLOOD_S / 4) for _ in range(4)]
    for answer, sent, closed in floods:
        assert _status(answer) == 431 and closed, answer[:200]
        assert sent < 4 * 1024 * 1024, "the server stops reading at the budget, not after megabytes"
    assert _rss_mb() - before < 20  # the server runs in this process: its peak RSS, not 800 MB
    assert _status(_ask(api_port, b"GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")) == 200


@pytest.mark.parametrize(("request_bytes", "status"), [
    pytest.param(b"GET /x HTTP/1.1\r\n" + b"".join(b"h%d: v\r\n" % i for i in range(99)) + b"\r\n", 200,
                 id="99-fields-pass"),
    pytest.param(b"GET /x HTTP/1.1\r\n" + b"".join(b"h%d: v\r\n" % i for i in range(101)) + b"\r\n", 431,
                 id="101-fields-431"),
    pytest.param(b"GET /" + b"a" * 8000 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 200, id="8000-byte-url-passes"),
    pytest.param(b"GET /" + b"a" * 8300 + b" HTTP/1.1\r\nHost: t\r\n\r\n", 414, id="8300-byte-url-414"),
    pytest.param(b"GET /x HTTP/1.1\r\nHost: t\r\nCookie: " + b"c" * 15_000 + b"\r\n\r\n", 200,
                 id="15k-head-passes"),
    pytest.param(b"GET /x HTTP/1.1\r\nHost: t\r\nCookie: " + b"c" * 17_000 + b"\r\n\r\n", 431,
                 id="17k-field-431"),
])
def test_budget_per_request(api_port: int, request_bytes: bytes, status: int) -> None:
    request_bytes = request_bytes.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1) if status == 200 \
        else request_bytes
    answer = _ask(api_port, request_bytes)
    assert _status(answer) == status, answer[:200]
    if status != 200:
        assert b"connection: close" in answer.lower()


def test_pipelined_requests_each_get_their_own_budget(api_port: int) -> None:
    one = b"GET /x HTTP/1.1\r\nHost: t\r\nCookie: " + b"c" * 10_000 + b"\r\n\r\n"
    answer = _ask(api_port, one * 3 + b"GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
    assert answer.count(b"HTTP/1.1 200") == 4, answer[:300]


def test_the_metrics_port_refuses_the_same_heads(metrics_port: int) -> None:
    answer, _, closed = _flood(metrics_port)
    assert _status(answer) == 431 and closed
    fields = b"GET /metrics HTTP/1.1\r\n" + b"".join(b"h%d: v\r\n" % i for i in range(101)) + b"\r\n"
    assert _status(_ask(metrics_port, fields)) == 431
    assert _status(_ask(metrics_port, b"GET /" + b"a" * 8300 + b" HTTP/1.1\r\nHost: t\r\n\r\n")) == 414
    assert _status(_ask(metrics_port, b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")) == 200


def test_the_budget_comes_from_the_settings() -> None:
    settings = load_settings(None, database_url="sqlite://", api={"max_request_head_bytes": 4096,
                                                                  "max_request_header_fields": 20,
                                                                  "max_url_bytes": 1024})
    assert http_limits(settings).head == HeadLimits(4096, 20, 1024)
    assert http_limits(load_settings(None, database_url="sqlite://")).head == HEAD
