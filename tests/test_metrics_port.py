"""The metrics port (issue 25, "a default that meets the scrape goal"): /metrics from a process of the standard
library only, started and restarted by the daemon, with the API's limits and read token.

These tests run the real process (``python -I -S serve/metrics_port.py``) through
txnwatch.supervise.metrics_process, as the daemon does, against a directory a test writes the render into.
"""

from __future__ import annotations

import gzip
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from txnwatch.core.config import load_settings
from txnwatch.runtime.publication import MetricsFile
from txnwatch.serve.metrics_port import Throttle, accepts_gzip, client_key
from txnwatch.supervise.binding import StartupError, bind
from txnwatch.supervise.metrics_process import MetricsProcess, bind_metrics, metrics_port_of

TEXT = b'# HELP txnwatch_up Up.\n# TYPE txnwatch_up gauge\ntxnwatch_up{cluster="a"} 1.0\n'
TOKEN = "s3cret-token"


class Counted:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def inc(self, kind: str, result: str) -> None:
        with self.lock:
            self.seen.append((kind, result))


def _settings(**api: object) -> object:
    return load_settings(None, database_url="sqlite://", clusters=[{"name": "a", "bootstrap_servers": ["h:9092"]}],
                         api={"host": "127.0.0.1", "port": 18080, **api})


def _wait(predicate: object, timeout_s: float = 15) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def _answers(url: str) -> bool:
    try:
        httpx.get(url, timeout=2)
    except httpx.HTTPError:
        return False
    return True


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[MetricsProcess, str, Path, Counted]]:
    settings = _settings(read_token=TOKEN, read_timeout_seconds=1, keep_alive_timeout_seconds=1, max_connections=3,
                         auth_failures_per_window=3)
    listener = bind("127.0.0.1", 0)
    listener.listen(64)
    counted = Counted()
    process = MetricsProcess(settings, listener, tmp_path, counted)  # type: ignore[arg-type]
    url = f"http://127.0.0.1:{process.port}/metrics"
    process.start()
    _wait(lambda: _answers(url))
    try:
        yield process, url, tmp_path, counted
    finally:
        process.stop()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_serves_the_published_render_gzip_or_text_and_503_before_it(served: tuple) -> None:
    _, url, directory, _ = served
    before = httpx.get(url, headers=AUTH)
    assert before.status_code == 503 and before.headers["retry-after"] == "5"
    MetricsFile(directory).publish(gzip.compress(TEXT))
    with httpx.Client(headers=AUTH) as client:  # keep-alive: several requests on one connection
        zipped = client.get(url, headers={"Accept-Encoding": "gzip"})
        plain = client.get(url, headers={"Accept-Encoding": "identity"})
    assert zipped.status_code == 200 and zipped.headers["content-encoding"] == "gzip" and zipped.content == TEXT
    assert plain.status_code == 200 and "content-encoding" not in plain.headers and plain.content == TEXT
    assert zipped.headers["content-type"].startswith("text/plain; version=")
    assert zipped.headers["x-content-type-options"] == "nosniff"
    newer = TEXT.replace(b"1.0", b"0.0")
    MetricsFile(directory).publish(gzip.compress(newer))
    assert httpx.get(url, headers=AUTH).content == newer
    assert httpx.get(url.replace("/metrics", "/api/v1/clusters"), headers=AUTH).status_code == 404
    assert httpx.post(url, headers=AUTH).status_code == 405
    assert httpx.head(url, headers=AUTH).status_code == 200


def test_read_token_refused_counted_and_throttled(served: tuple) -> None:
    _, url, directory, counted = served
    MetricsFile(directory).publish(gzip.compress(TEXT))
    missing = httpx.get(url)
    assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
    wrong = [httpx.get(url, headers={"Authorization": "Bearer guess"}).status_code for _ in range(3)]
    assert wrong == [401, 401, 401]
    assert httpx.get(url, headers=AUTH).status_code == 429  # the right token too, until the window ends
    _wait(lambda: len(counted.seen) == 4)
    assert counted.seen == [("read", "refused")] * 3 + [("read", "throttled")]


def test_half_sent_heads_are_closed_after_the_read_timeout_and_the_cap_makes_room(served: tuple) -> None:
    process, url, directory, _ = served
    MetricsFile(directory).publish(gzip.compress(TEXT))
    slow = socket.create_connection(("127.0.0.1", process.port))
    slow.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # never finished
    slow.settimeout(5)
    started = time.monotonic()
    assert slow.recv(100) == b""  # closed by the server
    assert 0.9 <= time.monotonic() - started < 4.5
    idle = [socket.create_connection(("127.0.0.1", process.port)) for _ in range(3)]  # the cap is 3
    time.sleep(0.2)
    assert httpx.get(url, headers=AUTH).status_code == 200  # a newcomer gets in: the oldest idle one goes
    idle[0].settimeout(2)
    assert idle[0].recv(100) == b""
    for s in (slow, *idle):
        s.close()


def test_a_process_that_dies_is_started_again(served: tuple) -> None:
    process, url, directory, _ = served
    MetricsFile(directory).publish(gzip.compress(TEXT))
    first = process.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    _wait(lambda: process.pid != first and httpx.get(url, headers=AUTH).status_code == 200)
    assert process.starts == 2


PARENT = """
import sys, time
from txnwatch.core.config import load_settings
from txnwatch.supervise.metrics_process import MetricsProcess
from txnwatch.supervise.binding import bind
settings = load_settings(None, database_url="sqlite://", clusters=[{"name": "a", "bootstrap_servers": ["h:9092"]}])
listener = bind("127.0.0.1", 0)
listener.listen(8)
process = MetricsProcess(settings, listener, sys.argv[1])
process.start()
while process.pid is None:
    time.sleep(0.05)
print(process.pid, flush=True)
time.sleep(600)
"""


def test_the_process_ends_with_its_parent(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE)
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(child, 0)  # alive
    parent.kill()
    parent.wait()

    def gone() -> bool:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie until init reaps it counts as gone
            return Path(f"/proc/{child}/stat").read_text().split(") ")[1].startswith("Z")
        except (FileNotFoundError, IndexError):
            return True

    _wait(gone, timeout_s=10)


def test_the_metrics_port_is_api_port_plus_one_unless_set() -> None:
    assert metrics_port_of(_settings()) == 18081  # type: ignore[arg-type]
    assert metrics_port_of(load_settings(None, database_url="sqlite://", api={"port": 18080},
                                         metrics={"port": 0})) is None
    assert metrics_port_of(load_settings(None, database_url="sqlite://", metrics={"port": 9999})) == 9999


def test_a_taken_implicit_port_only_warns_a_taken_explicit_one_stops_the_start() -> None:
    taken = bind("127.0.0.1", 0)
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        implicit = load_settings(None, database_url="sqlite://", api={"host": "127.0.0.1", "port": port - 1})
        assert bind_metrics(implicit) is None
        explicit = load_settings(None, database_url="sqlite://", api={"host": "127.0.0.1"}, metrics={"port": port})
        with pytest.raises(StartupError):
            bind_metrics(explicit)
    finally:
        taken.close()


@pytest.mark.parametrize(("header", "expected"), [
    pytest.param("gzip", True, id="gzip"),
    pytest.param("identity", False, id="identity"),
    pytest.param("gzip;q=0", False, id="refused-with-q0"),
    pytest.param("br, gzip;q=0.5", True, id="among-others"),
    pytest.param("", False, id="none"),
])
def test_accepts_gzip(header: str, expected: bool) -> None:
    assert accepts_gzip(header) is expected


def test_failures_count_per_client_and_ipv6_per_64() -> None:
    assert client_key("2001:db8:1:2:3:4:5:6") == client_key("2001:db8:1:2:ffff::1") == "2001:db8:1:2::/64"
    assert client_key("::ffff:10.0.0.1") == "10.0.0.1"
    throttle = Throttle(limit=2, window_s=60)
    throttle.fail("a", 0.0)
    assert throttle.blocked("a", 1.0) is None
    throttle.fail("a", 1.0)
    assert throttle.blocked("a", 1.0) == 59 and throttle.blocked("b", 1.0) is None
    assert throttle.blocked("a", 60.0) is None  # the window ended
