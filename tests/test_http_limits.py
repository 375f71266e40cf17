"""The HTTP server's limits (issue 23 item 4): floods of idle and half-sent connections on loopback against
`txnwatch run`, with the API in the daemon's process (asyncio + httptools) and in a worker process (uvloop + httptools); and the
pieces (the cap's choice, the rate-limited log, the open-file limit) on their own.

Before: no read deadline, no cap and the default 1,024 open files: 1,100 idle connections from one client
made /healthz time out and the log write "Too many open files" tens of thousands of times.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import floods
from tests.fixtures.daemon import free_port, terminate
from txnwatch.serve.http_limits import ConnectionGuard, HttpLimits, RateLimitedLog, connection_cap

CAP = 300
READ_TIMEOUT_S = 2.0
DEFAULT_SOFT_NOFILE = 1024  # what a process gets from most distributions and container runtimes


class FakeConnection:
    def __init__(self, name: str, waiting: bool = True) -> None:
        self.name, self._waiting, self.closed = name, waiting, False

    def waiting(self) -> bool:
        return self._waiting

    def close_now(self) -> None:
        self.closed = True


def test_at_the_cap_the_longest_waiting_connection_makes_room() -> None:
    guard = ConnectionGuard(HttpLimits(max_connections=3, read_timeout_s=1, keep_alive_timeout_s=1))
    busy, old, recent = FakeConnection("busy", waiting=False), FakeConnection("old"), FakeConnection("recent")
    for c in (busy, old, recent):
        guard.opened(c)
    guard.active(old)  # old just finished a response: now the newest to wait
    probe = FakeConnection("probe")
    guard.opened(probe)
    assert [c.name for c in (busy, old, recent, probe) if c.closed] == ["recent"]
    guard.lost(recent)
    assert len(guard) == 3


def test_a_newcomer_is_refused_only_when_every_connection_is_busy() -> None:
    guard = ConnectionGuard(HttpLimits(max_connections=2, read_timeout_s=1, keep_alive_timeout_s=1))
    busy = [FakeConnection(f"busy{i}", waiting=False) for i in range(2)]
    for c in busy:
        guard.opened(c)
    newcomer = FakeConnection("new")
    guard.opened(newcomer)
    assert newcomer.closed and not any(c.closed for c in busy)


@pytest.mark.parametrize(("configured", "open_files", "expected"), [
    pytest.param(1000, 1_048_576, 1000, id="plenty-of-files"),
    pytest.param(1000, 1024, 1024 - 256, id="default-soft-limit-leaves-256"),
    pytest.param(1000, 256, 192, id="small-limit-keeps-a-quarter"),
    pytest.param(1000, resource.RLIM_INFINITY, 1000, id="unlimited"),
])
def test_connection_cap_leaves_files_for_the_rest(configured: int, open_files: int, expected: int) -> None:
    assert connection_cap(configured, open_files) == expected


def test_closed_connections_are_logged_once_a_minute_with_counts(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    limited = RateLimitedLog(logging.getLogger("t"), "closed", every_s=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, "t"):
        for i in range(10_000):
            now[0] = i * 0.01  # 10,000 events over 100 s
            limited.count("read timeout" if i % 2 else "at the connection cap")
    # The first event is told at once; the next line comes with event 6,000 (t = 60 s) and counts events 1..6,000
    # (3,000 of each kind); events 6,001..9,999 wait for the next minute.
    assert [r.getMessage() for r in caplog.records] == [
        "closed: 1 at the connection cap",
        "closed in the last 60s: 3000 at the connection cap, 3000 read timeout"]


def test_failed_accepts_are_one_line_not_a_traceback_each(caplog: pytest.LogCaptureFixture) -> None:
    """asyncio reports each EMFILE from accept() with a traceback through the loop's exception handler."""
    from txnwatch.serve.http_limits import ACCEPT_FAILED, quiet_accept_errors

    loop = asyncio.new_event_loop()
    try:
        quiet_accept_errors(loop)
        with caplog.at_level(logging.WARNING):
            for _ in range(1000):
                loop.call_exception_handler({"message": f"{ACCEPT_FAILED}", "exception": OSError(24, "Too many open "
                                             "files")})
            loop.call_exception_handler({"message": "something else"})
    finally:
        loop.close()
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "accept() failed, new connections wait in the listen backlog: 1 Too many open files"
    assert messages[1:] == ["something else"] and not caplog.records[0].exc_info


def test_start_raises_the_soft_open_file_limit_to_the_hard_one() -> None:
    code = ("import resource\nfrom txnwatch.serve.http_limits import raise_open_files_limit\n"
            "print(*raise_open_files_limit(), *resource.getrlimit(resource.RLIMIT_NOFILE))")
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         preexec_fn=_default_soft_limit).stdout.split()
    assert [int(v) for v in out] == [DEFAULT_SOFT_NOFILE, hard, hard, hard]


def _default_soft_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (DEFAULT_SOFT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _start(tmp_path: Path, workers: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}", "poll_interval_seconds": 1,
        "clusters": [{"name": "gone", "bootstrap_servers": "127.0.0.1:9", "connect_timeout_ms": 100,
                      "request_timeout_ms": 200}],
        "api": {"host": "127.0.0.1", "port": port, "workers": workers, "max_connections": CAP,
                "read_timeout_seconds": READ_TIMEOUT_S, "keep_alive_timeout_seconds": 1}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    log = tmp_path / "daemon.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)], stdout=out,
                                stderr=subprocess.STDOUT, env=env, preexec_fn=_default_soft_limit)
    return proc, port, log


async def _flood_and_probe(proc: subprocess.Popen[bytes], port: int, workers: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    # Up when /healthz answers and every worker runs (they share the listening socket: the kernel spreads
    # connections over the processes that accept).
    while (await floods.probe(port, timeout_s=2))[1] != 200 or len(floods.process_tree(proc.pid)) < 1 + workers:
        assert proc.poll() is None and time.monotonic() < deadline, "the daemon did not start"
        await asyncio.sleep(0.3)
    polls_before = floods.counter_sum(await floods.metrics_text(port), "txnwatch_polls_total")
    idle = await floods.idle(port, 1100)
    half = await floods.half_sent(port, 200)
    probes = [await floods.probe(port) for _ in range(10)]
    scrape = await floods.probe(port, "/metrics")
    fds, nofile = {}, {}
    for pid in floods.process_tree(proc.pid):
        try:
            fds[pid], nofile[pid] = len(os.listdir(f"/proc/{pid}/fd")), floods.open_files_limit(pid)
        except OSError:  # a short-lived child (the schema check) already gone
            continue
    await asyncio.sleep(READ_TIMEOUT_S + 1)
    await floods.trickle(half)  # a slowloris keeps sending: that must not extend its deadline
    half_open = await floods.still_open(half, wait_s=1.0)
    # Polls go on while the flood is held. The cluster never answers, so its full polls back off (5, 10, 20 s...):
    # wait for the next one, up to a minute, rather than a fixed time.
    polls_after, waited_until = polls_before, time.monotonic() + 60
    while polls_after <= polls_before and time.monotonic() < waited_until:
        await asyncio.sleep(1)
        polls_after = floods.counter_sum(await floods.metrics_text(port), "txnwatch_polls_total")
    floods.close_all(idle + half)
    return dict(probes=probes, scrape=scrape, fds=fds, half_open=half_open, polls=(polls_before, polls_after),
                connected=(len(idle), len(half)), nofile=nofile)


@pytest.mark.parametrize("workers", [pytest.param(0, id="daemon"), pytest.param(1, id="worker")])
def test_a_flood_of_idle_and_half_sent_connections_leaves_healthz_metrics_and_polls_working(
        tmp_path: Path, workers: int) -> None:
    floods.raise_own_open_files(4096)
    proc, port, log = _start(tmp_path, workers)
    try:
        seen = asyncio.run(_flood_and_probe(proc, port, workers))
    finally:
        terminate(proc)
    text = log.read_text(errors="replace")
    print(seen, text[-2000:], sep="\n")
    assert seen["connected"] == (1100, 200), "the listen backlog takes every connection in"
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    assert set(seen["nofile"].values()) == {hard}, "the soft open-file limit is raised to the hard one"
    # Generous bounds for a loaded machine: each probe on a fresh connection answers 200 within 10 s.
    assert all(status == 200 and seconds is not None for seconds, status in seen["probes"]), seen["probes"]
    assert seen["scrape"][1] == 200
    for pid, count in seen["fds"].items():
        assert count < CAP + 100, f"pid {pid} holds {count} descriptors; the cap is {CAP} connections"
    assert seen["half_open"] == 0, "half-sent requests are closed after the read timeout"
    assert seen["polls"][1] > seen["polls"][0], "polling goes on during the flood"
    assert "Too many open files" not in text
    assert text.count("closed by the server's limits") <= 2, "closed connections are logged once a minute"
