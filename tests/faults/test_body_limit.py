"""No request body, chunked or not, grows the daemon's memory past the limit (issue 15, defect 2).

A real `txnwatch run` process and a raw-socket client on loopback: the body is streamed with
``Transfer-Encoding: chunked`` (no Content-Length to check) and the daemon's RSS is read from
/proc before and after.  Before the streaming limit, a 400 MiB body took the daemon to 2.6 GB.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from tests.fixtures.daemon import answers_ok, free_port, terminate, wait_for

BODY_MIB = 400
CHUNK = b"x" * (1 << 20)


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"{field} not in /proc/{pid}/status")


def stream_chunked(port: int, path: str, total_mib: int, headers: str = "", *,
                   ignore_answer: bool = False) -> tuple[int, int]:
    """Sends up to ``total_mib`` MiB chunked until the server answers (or, ``ignore_answer``, until it
    hangs up): (status, bytes sent)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    answer = bytearray()

    def read() -> None:
        try:
            while b"\r\n" not in answer:
                data = sock.recv(4096)
                if not data:
                    return
                answer.extend(data)
        except OSError:
            return

    sent = 0
    try:
        sock.sendall((f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      f"Transfer-Encoding: chunked\r\n{headers}\r\n").encode())
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        frame = f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n"
        for _ in range(total_mib):
            if answer and not ignore_answer:
                break
            try:
                sock.sendall(frame)
            except OSError:  # the server answered 413 and hung up: that is the point
                break
            sent += len(CHUNK)
        else:
            with contextlib.suppress(OSError):  # the server may already have answered and hung up
                sock.sendall(b"0\r\n\r\n")
        reader.join(timeout=60)
    finally:
        sock.close()
    status_line = bytes(answer).split(b"\r\n", 1)[0].decode(errors="replace")
    assert status_line.startswith("HTTP/1.1 "), f"no HTTP answer; got {bytes(answer)[:80]!r}"
    return int(status_line.split()[1]), sent


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("bodylimit")
    port = free_port()
    config = tmp / "config.yaml"
    config.write_text(yaml.safe_dump({"database_url": f"sqlite:///{tmp / 'db.sqlite'}",
                                      "api": {"host": "127.0.0.1", "port": port, "read_token": "r-token"}}))
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                            stdout=(tmp / "log").open("wb"), stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: answers_ok(f"http://127.0.0.1:{port}/healthz"), 60, what="the daemon to serve")
        yield proc, port
    finally:
        terminate(proc)


def test_oversized_chunked_body_gets_413_and_leaves_rss_flat(daemon) -> None:
    proc, port = daemon
    stream_chunked(port, "/api/v1/admin/abort", 1)  # warm the code path up before measuring
    time.sleep(0.5)
    before, peak_before = rss_kib(proc.pid), rss_kib(proc.pid, "VmHWM")
    started = time.monotonic()
    # A hostile client keeps sending after the 413: the server must drop the rest, not buffer it.
    status, sent = stream_chunked(port, "/api/v1/admin/abort", BODY_MIB, ignore_answer=True)
    took = time.monotonic() - started
    time.sleep(0.5)
    after, peak_after = rss_kib(proc.pid), rss_kib(proc.pid, "VmHWM")
    print(f"{BODY_MIB} MiB chunked body: HTTP {status} after {sent / 2**20:.0f} MiB sent in {took:.1f}s; "
          f"RSS {before / 1024:.1f} -> {after / 1024:.1f} MB (delta {(after - before) / 1024:+.1f} MB), "
          f"peak delta {(peak_after - peak_before) / 1024:+.1f} MB")
    assert status == 413
    assert after - before < 10 * 1024, f"RSS grew {(after - before) / 1024:.0f} MB"
    assert peak_after - peak_before < 10 * 1024, f"peak RSS grew {(peak_after - peak_before) / 1024:.0f} MB"
    assert proc.poll() is None


@pytest.mark.parametrize(("path", "headers"), [
    pytest.param("/api/v1/admin/abort", "", id="admin-disabled-no-token"),
    pytest.param("/api/v1/clusters", "Authorization: Bearer wrong\r\n", id="read-route-wrong-token"),
    pytest.param("/no/such/route", "", id="unknown-route"),
])
def test_413_comes_before_auth_routing_and_parsing(daemon, path: str, headers: str) -> None:
    _, port = daemon
    status, _ = stream_chunked(port, path, 2, headers)
    assert status == 413


def test_small_chunked_body_still_reaches_the_route(daemon) -> None:
    _, port = daemon
    body = b'{"cluster": "x", "topic": "t", "partition": 0, "producer_id": 1, "producer_epoch": 0}'
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"POST /api/v1/admin/abort HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                     + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n")
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 403"), answer[:200]  # admin disabled: the route ran, the body was fine
