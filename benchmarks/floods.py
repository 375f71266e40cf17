"""Connection floods against `txnwatch run` on loopback: does /healthz keep answering, and at what cost?

Starts the daemon (SQLite, one cluster: the given lab's bootstrap servers, or a closed port so polls fail fast
and keep coming), under the soft open-file limit most containers get (1,024; the daemon raises it itself), with
the default HTTP limits (api.max_connections 1000, read_timeout_seconds 10, keep_alive_timeout_seconds 5).
Then, phase by phase, one client (this process) holds N connections:

* quiet      no flood (the reference);
* idle       N connections that never send a byte, those the server closes opened again every 2 s;
* slow       N half-sent requests, one more header line every 2 s (slowloris), reopened likewise;
* hogs       N keep-alive connections, each sending a request every ~2 s (under the 5 s keep-alive).

During each phase /healthz is probed 10 times a second on fresh connections (as a kubelet does) and /metrics
once a second. Printed per phase: how many flood connections are still open at its end (the server keeps at
most api.max_connections per serving process), /healthz p50/p99/max
and failures, /metrics p99, the serving processes' RSS, open descriptors and CPU seconds, polls made, the
series count, the bytes the daemon logged, and the machine's load (1-min load average, CPU seconds others used
meanwhile).

    .venv/bin/python benchmarks/floods.py [--connections 2000] [--seconds 15] [--workers 0,2]
                                          [--bootstrap host:port]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness
from tests.fixtures import floods

SOFT_NOFILE = 1024


def _soft_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (SOFT_NOFILE, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))


def _size(path: Path) -> int:
    return path.stat().st_size


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


@dataclass
class Phase:
    phase: str
    opened: int
    held: int
    p50: float
    p99: float
    max: float
    failed: int
    probes: int
    metrics_p99: float
    rss: float
    fds: int
    cpu: float
    polls: float
    series: int
    log_kb: float
    wall: float
    load: float
    others: float


class Prober(threading.Thread):
    """/healthz 10 times a second and /metrics once a second, each on a fresh blocking connection, until
    ``until`` (time.monotonic())."""

    def __init__(self, port: int, until: float) -> None:
        super().__init__(daemon=True)
        self.port, self.until = port, until
        self.healthz: list[float] = []
        self.metrics: list[float] = []
        self.failures = 0

    def _get(self, path: str) -> float | None:
        started = time.perf_counter()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n".encode())
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
        except OSError:
            return None
        return (time.perf_counter() - started) * 1000 if data.startswith(b"HTTP/1.1 200") else None

    def run(self) -> None:
        last_scrape = 0.0
        while time.monotonic() < self.until:
            ms = self._get("/healthz")
            if ms is None:
                self.failures += 1
            else:
                self.healthz.append(ms)
            if time.monotonic() - last_scrape >= 1:
                last_scrape = time.monotonic()
                scraped = self._get("/metrics")
                self.metrics.append(float("inf") if scraped is None else scraped)
            time.sleep(0.1)


def start(directory: Path, workers: int, bootstrap: str | None) -> harness.Daemon:
    cluster: dict[str, object] = {"name": "bench", "bootstrap_servers": bootstrap or "127.0.0.1:9"}
    if not bootstrap:
        cluster.update(connect_timeout_ms=100, request_timeout_ms=200)
    return harness.Daemon.start(directory, [cluster], name=f"floods-{workers}", preexec_fn=_soft_limit, settings={
        "poll_interval_seconds": 5, "transaction_log": {"enabled": bool(bootstrap)}, "api": {"workers": workers}})


async def wait_up(proc: subprocess.Popen[bytes], port: int, workers: int) -> None:
    deadline = time.monotonic() + 180
    while (await floods.probe(port, timeout_s=2))[1] != 200 or len(floods.process_tree(proc.pid)) < 1 + workers:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the daemon did not start; see its log in the temporary directory")
        await asyncio.sleep(0.5)


async def run_phase(name: str, port: int, pid: int, log: Path, seconds: float,
                    setup: Callable[[], Awaitable[list[floods.Conn]]],
                    tick: Callable[[list[floods.Conn], float], Awaitable[None]] | None) -> Phase:
    text = await floods.metrics_text(port)
    polls_before = floods.counter_sum(text, "txnwatch_polls_total") if text else float("nan")
    log_before = _size(log)
    cpu_before, busy_before = floods.figures(pid).cpu_s, harness.machine_busy_s()
    conns = await setup()
    started = time.monotonic()
    probes = Prober(port, started + seconds)
    probes.start()  # a thread of its own: the flood's own work on this event loop must not delay the probes
    while time.monotonic() - started < seconds:
        if tick is not None:
            await tick(conns, time.monotonic() - started)
        await asyncio.sleep(2)
    probes.join()
    healthz, metrics, failures = probes.healthz, probes.metrics, probes.failures
    held = await floods.still_open(conns, wait_s=0.2) if conns else 0
    server = floods.figures(pid)
    text = await floods.metrics_text(port)
    floods.close_all(conns)
    wall = time.monotonic() - started
    others = harness.machine_busy_s() - busy_before - (server.cpu_s - cpu_before)
    series = sum(1 for line in text.splitlines() if line and not line.startswith("#"))
    return Phase(phase=name, opened=len(conns), held=held, p50=_pct(healthz, 50), p99=_pct(healthz, 99),
                 max=max(healthz, default=float("nan")), failed=failures, probes=len(healthz) + failures,
                 metrics_p99=_pct(metrics, 99), rss=server.rss_mb, fds=server.fds, cpu=server.cpu_s - cpu_before,
                 polls=floods.counter_sum(text, "txnwatch_polls_total") - polls_before if text else float("nan"),
                 series=series, log_kb=(_size(log) - log_before) / 1024, wall=wall,
                 load=os.getloadavg()[0], others=others)


async def bench(port: int, pid: int, log: Path, n: int, seconds: float) -> list[Phase]:
    async def nothing() -> list[floods.Conn]:
        return []

    async def idle() -> list[floods.Conn]:
        return await floods.idle(port, n)

    async def slow() -> list[floods.Conn]:
        return await floods.half_sent(port, n)

    async def refill(conns: list[floods.Conn], again: Callable[[int, int], Awaitable[list[floods.Conn]]]) -> None:
        """The attacker keeps the flood up: every connection the server closed is opened again."""
        kept = [c for c in conns if not (c[0].at_eof() or c[1].is_closing())]
        floods.close_all(c for c in conns if c[0].at_eof() or c[1].is_closing())
        conns[:] = kept + await again(port, len(conns) - len(kept))

    async def idle_again(conns: list[floods.Conn], _elapsed: float) -> None:
        await refill(conns, floods.idle)

    async def trickle(conns: list[floods.Conn], _elapsed: float) -> None:
        await floods.trickle(conns)
        await refill(conns, floods.half_sent)

    async def hogs() -> list[floods.Conn]:
        conns = await floods.idle(port, n)
        await floods.keep_alive_request(conns)
        return conns

    async def hog_again(conns: list[floods.Conn], _elapsed: float) -> None:  # a request every ~2 s on each
        await floods.keep_alive_request([c for c in conns if not c[1].is_closing() and not c[0].at_eof()])

    Tick = Callable[[list[floods.Conn], float], Awaitable[None]]
    phases: list[tuple[str, Callable[[], Awaitable[list[floods.Conn]]], Tick | None]] = [
        ("quiet", nothing, None), ("idle", idle, idle_again), ("slow", slow, trickle), ("hogs", hogs, hog_again)]
    results = []
    for name, setup, tick in phases:
        results.append(await run_phase(name, port, pid, log, seconds, setup, tick))
        await asyncio.sleep(2)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--workers", default="0", help="comma-separated api.workers values to run, e.g. 0,2")
    parser.add_argument("--bootstrap", help="a Kafka lab's bootstrap servers (default: none, polls fail fast)")
    args = parser.parse_args()
    floods.raise_own_open_files(args.connections * 2 + 256)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at start; {args.connections} flood "
          f"connections per phase, {args.seconds:g} s each; daemon started with soft RLIMIT_NOFILE {SOFT_NOFILE}")
    header = (f"{'workers':>7} {'phase':<6} {'held':>5} {'healthz p50':>11} {'p99':>7} {'max':>7} {'failed':>8} "
              f"{'metrics p99':>11} {'RSS MB':>7} {'fds':>5} {'CPU s':>6} {'wall s':>6} {'polls':>5} {'series':>6} "
              f"{'log KB':>6} {'load':>5} {'others CPU s':>12}")
    with tempfile.TemporaryDirectory(prefix="txnwatch-floods-") as tmp:
        rows = []
        for workers in [int(w) for w in args.workers.split(",")]:
            daemon = start(Path(tmp), workers, args.bootstrap)
            try:
                asyncio.run(wait_up(daemon.proc, daemon.port, workers))
                rows += [(workers, r) for r in asyncio.run(bench(daemon.port, daemon.pid, daemon.log, args.connections,
                                                                 args.seconds))]
            finally:
                daemon.stop()
        print(header)
        for workers, r in rows:
            print(f"{workers:>7} {r.phase:<6} {r.held:>5} {r.p50:>9.1f}ms {r.p99:>5.1f}ms {r.max:>5.1f}ms "
                  f"{r.failed:>3}/{r.probes:<4} {r.metrics_p99:>9.1f}ms {r.rss:>7.0f} {r.fds:>5} {r.cpu:>6.1f} "
                  f"{r.wall:>6.1f} {r.polls:>5.0f} {r.series:>6} {r.log_kb:>6.0f} {r.load:>5.2f} "
                  f"{r.others:>12.1f}")
        quiet = {w: r for w, r in rows if r.phase == "quiet"}
        for workers, r in rows:
            if r.phase != "quiet":
                print(f"api.workers {workers}, {r.phase}: {r.held} of {r.opened} flood connections held at the end; "
                      f"/healthz p99 {r.p99:.1f} ms = {r.p99 / quiet[workers].p99:.1f}x quiet, {r.failed} failed; "
                      f"RSS +{r.rss - quiet[workers].rss:.0f} MB")


if __name__ == "__main__":
    main()
