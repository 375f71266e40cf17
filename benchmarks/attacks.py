"""The memory attacks of issue 38 (items 1-3) against `txnwatch run`, one at a time, beside its idle figure.

The daemon (SQLite, defaults but a short poll interval) watches two clusters: ``good`` (a one-broker lab started
here, or ``--bootstrap``) and ``evil``, tests/fixtures/hostile_broker.py's HostileBroker on loopback in this
process (imported, not copied: the answers are the ones tests/kafka/test_bounded.py checks).  Phases:

* idle      the evil broker answers ApiVersions, Metadata (no topics) and an empty ListTransactions: the reference;
* headers   4 connections to the API port each send ``GET /healthz HTTP/1.1`` and then ``a:b\\r\\n`` header lines
            as fast as the server takes them, for 9 s (inside the read deadline), opening a new connection
            whenever the server closes one (before the head budget: RSS 82 -> 844 MB);
* frame     the evil broker answers Metadata with a size field of 2^31-1 and then zeros for as long as the daemon
            reads (before the frame bound: 82 -> 2,300 MB in 40 s, and every other cluster's polls with it);
* entries   it answers ListTransactions with a complete, well-formed frame of 1,500,000 entries (40 MB before the
            entry bound: ~1 GB, every poll; here 16.5 MB: empty ids).

Printed per phase: the peak RSS of the daemon's process tree (/proc, every 0.2 s) without the Parquet archive
export's child, which runs on its own schedule (store/archive_job.py) whatever the attack, and with it (what the
pod's cgroup counts when the two meet); the ratio to idle's; the share of the chart's memory limit
(helm/txnwatch/values.yaml ``resources.limits.memory``); the good cluster's successful polls per minute (its own
``polls`` rows) against idle's; and what the API says of both clusters (``up``, ``last_error``).  Figures and
ratios; nothing is asserted.

    .venv/bin/python benchmarks/attacks.py [--seconds 40] [--poll-interval 2] [--bootstrap host:port]
                                           [--keep-work]
"""

from __future__ import annotations

import argparse
import shutil
import socket
import sqlite3
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness
from tests.fixtures.floods import HALF_HEAD
from tests.fixtures.hostile_broker import LIST_TRANSACTIONS, METADATA, HostileBroker, endless_frame, list_transactions

HEADER_SECONDS = 9.0
HEADER_CONNECTIONS = 4
ENTRIES = 1_500_000
MIB = 1024 * 1024


def chart_memory_limit_mb() -> float:
    """``resources.limits.memory`` of the chart, in MB (2^20 bytes, as /proc's kB / 1024 are)."""
    import yaml

    values = yaml.safe_load((harness.ROOT / "helm" / "txnwatch" / "values.yaml").read_text())
    text = str(values["resources"]["limits"]["memory"])
    units = {"Ki": 1 / 1024, "Mi": 1.0, "Gi": 1024.0}
    for suffix, scale in units.items():
        if text.endswith(suffix):
            return float(text.removesuffix(suffix)) * scale
    return float(text) / MIB


class Evil:
    """What the hostile broker answers, switched per phase (its connection threads read ``mode`` per request)."""

    def __init__(self) -> None:
        self.mode = "idle"
        self.entries_frame = list_transactions(0, ENTRIES)  # built once: 16.5 MB in this process, not the daemon's

    def answer(self, key: int, _version: int, correlation_id: int) -> Iterator[bytes | memoryview] | None:
        if self.mode == "frame" and key == METADATA:
            return endless_frame()
        if key == LIST_TRANSACTIONS:
            if self.mode == "entries":
                head: bytes | memoryview = self.entries_frame[:4] + struct.pack(">i", correlation_id)
                return iter([head, memoryview(self.entries_frame)[8:]])
            return iter([list_transactions(correlation_id, 0)])
        return None  # ApiVersions and Metadata as a broker answers them; silence for the rest


@dataclass
class Flood:
    """What the header flood did: connections opened, bytes sent, and how the server ended them."""

    opened: int = 0
    sent_bytes: int = 0
    answers: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, status: str) -> None:
        with self.lock:
            self.answers[status] = self.answers.get(status, 0) + 1


def header_flood(port: int, connections: int = HEADER_CONNECTIONS, seconds: float = HEADER_SECONDS) -> Flood:
    """Item 1: header lines without end on ``connections`` sockets; a new socket whenever the server closes one."""
    flood, until = Flood(), time.monotonic() + seconds
    block = b"a:b\r\n" * 4096  # 20 KiB a write

    def one() -> None:
        while time.monotonic() < until:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                time.sleep(0.05)
                continue
            with flood.lock:
                flood.opened += 1
            with sock:
                try:
                    sock.sendall(HALF_HEAD)
                    while time.monotonic() < until:
                        sock.sendall(block)
                        with flood.lock:
                            flood.sent_bytes += len(block)
                except OSError:
                    pass
                flood.count(_status_of(sock))

    threads = [threading.Thread(target=one, daemon=True) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return flood


def _status_of(sock: socket.socket) -> str:
    """The status line the server answered before it closed (431, 414, ...), or how the socket ended."""
    try:
        sock.settimeout(1)
        head = sock.recv(64)
    except OSError as exc:
        return type(exc).__name__
    if head.startswith(b"HTTP/1.1 "):
        return head[9:12].decode("ascii", "replace")
    return "closed" if not head else "other"


ARCHIVE_CHILD = b"txnwatch.store.archive_job"


class TreeSampler(threading.Thread):
    """The daemon tree's RSS every ``every`` s, the archive export's child apart: (peak without it, peak of all,
    median without it, the child's own peak or 0 when it did not run)."""

    def __init__(self, root: int, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.root, self.every = root, every
        self.daemon_mb: list[float] = []
        self.total_mb: list[float] = []
        self.archive_peak_mb = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            daemon = archive = 0.0
            for pid in harness.tree(self.root):
                rss = harness.memory_mb(pid).get("VmRSS", 0.0)
                if ARCHIVE_CHILD in _cmdline(pid):
                    archive += rss
                else:
                    daemon += rss
            self.daemon_mb.append(daemon)
            self.total_mb.append(daemon + archive)
            self.archive_peak_mb = max(self.archive_peak_mb, archive)
            self._halt.wait(self.every)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def good_polls(database_url: str, cluster: str, since: float, until: float) -> tuple[int, int, float]:
    """(successful, all) polls of ``cluster`` that started in [since, until), from the daemon's own table, and the
    longest time between two successful ones that began there (or from ``since`` to the first)."""
    path = database_url.removeprefix("sqlite:///")
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
        rows = conn.execute("SELECT p.started_at, p.ok FROM polls p JOIN clusters c ON c.id = p.cluster_id "
                            "WHERE c.name = ?", (cluster,)).fetchall()
    ok = total = 0
    gap, last = 0.0, since
    for started, good in rows:
        at = datetime.fromisoformat(str(started))
        t = (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()
        if since <= t < until:
            total += 1
            if good:
                ok += 1
                gap, last = max(gap, t - last), t
    return ok, total, max(gap, until - last)


def clusters_said(daemon: harness.Daemon) -> dict[str, tuple[bool, str | None]]:
    import httpx

    answer = httpx.get(daemon.url("/api/v1/clusters"), timeout=30).json()
    items = answer["data"] if isinstance(answer, dict) else answer
    return {c["name"]: (bool(c["up"]), c.get("last_error")) for c in items}


@dataclass
class Phase:
    name: str
    peak_mb: float
    peak_all_mb: float
    archive_mb: float
    steady_mb: float
    good_ok: int
    good_all: int
    good_gap_s: float
    seconds: float
    evil: tuple[bool, str | None]
    good: tuple[bool, str | None]
    note: str = ""

    @property
    def good_per_minute(self) -> float:
        return self.good_ok / self.seconds * 60


def run_phase(daemon: harness.Daemon, name: str, seconds: float, act: Callable[[], str] | None = None) -> Phase:
    """Samples the daemon's tree while ``act`` runs (or for ``seconds`` when it returns first, or without one)."""
    sampler = TreeSampler(daemon.pid)
    sampler.start()
    start = time.time()
    note = act() if act is not None else ""
    left = seconds - (time.time() - start)
    if left > 0:
        time.sleep(left)
    end = time.time()
    sampler.stop()
    said = clusters_said(daemon)
    ok, total, gap = good_polls(daemon.database_url, "good", start, end)
    return Phase(name, max(sampler.daemon_mb), max(sampler.total_mb), sampler.archive_peak_mb,
                 statistics.median(sampler.daemon_mb), ok, total, gap, end - start, said.get("evil", (False, None)),
                 said.get("good", (False, None)), note)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=40, help="length of the idle, frame and entries phases")
    parser.add_argument("--poll-interval", type=float, default=2, help="poll_interval_seconds of both clusters")
    parser.add_argument("--bootstrap", help="a running Kafka for the good cluster instead of a lab started here")
    parser.add_argument("--keep-work", action="store_true", help="keep the daemon's directory (config, log, db)")
    args = parser.parse_args()

    limit_mb = chart_memory_limit_mb()
    loads = harness.Loads()
    loads.sample()
    print(harness.machine_line(loads))
    print(f"txnwatch {harness.commit_of_checkout()}; chart memory limit {limit_mb:.0f} MB; polls every "
          f"{args.poll_interval:g} s; phases of {args.seconds:g} s (the header flood {HEADER_SECONDS:g} s)")
    evil = Evil()
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-attacks-"))
    with harness.Lab(args.bootstrap) as lab, HostileBroker(evil.answer) as broker:
        daemon = harness.Daemon.start(work, [
            {"name": "good", "bootstrap_servers": [lab.bootstrap]},
            {"name": "evil", "bootstrap_servers": [broker.bootstrap], "request_timeout_ms": 5_000,
             "connect_timeout_ms": 5_000}], settings={"poll_interval_seconds": args.poll_interval})
        try:
            daemon.wait(polls=4)
            clusters_said(daemon)  # the API stack built before idle is measured (serve/front.py builds it on first use)
            time.sleep(args.poll_interval * 2)
            phases = [run_phase(daemon, "idle", args.seconds)]
            print(f"  idle: peak {phases[0].peak_mb:.0f} MB", flush=True)
            loads.sample()

            def headers() -> str:
                flood = header_flood(daemon.port)
                answers = ", ".join(f"{k}: {v}" for k, v in sorted(flood.answers.items()))
                return (f"{flood.opened} connections, {flood.sent_bytes / MIB:.1f} MiB of header lines sent; "
                        f"ended by: {answers}")

            phases.append(run_phase(daemon, "headers", HEADER_SECONDS + args.poll_interval, headers))
            print(f"  headers: peak {phases[-1].peak_mb:.0f} MB", flush=True)
            loads.sample()
            for mode in ("frame", "entries"):
                evil.mode = mode
                phases.append(run_phase(daemon, mode, args.seconds))
                evil.mode = "idle"
                print(f"  {mode}: peak {phases[-1].peak_mb:.0f} MB", flush=True)
                loads.sample()
                time.sleep(args.poll_interval * 2)
            alive = daemon.proc.poll() is None and daemon.answers()
        finally:
            daemon.stop()
    idle = phases[0]
    print()
    harness.rows(["phase", "peak RSS MB", "x idle", f"of {limit_mb:.0f} MB", "median RSS MB", "+ archive MB",
                  "good polls/min", "x idle", "longest gap s"],
                 [[p.name, f"{p.peak_mb:.0f}", harness.ratio(p.peak_mb, idle.peak_mb),
                   f"{p.peak_mb / limit_mb:.0%}", f"{p.steady_mb:.0f}",
                   f"{p.peak_all_mb:.0f} ({p.archive_mb:.0f})" if p.archive_mb else "-",
                   f"{p.good_per_minute:.1f} ({p.good_ok}/{p.good_all})",
                   harness.ratio(p.good_per_minute, idle.good_per_minute), f"{p.good_gap_s:.1f}"] for p in phases],
                 first=10, width=16)
    print("(peak and median RSS: the daemon's tree without the archive export's child; '+ archive': the tree's "
          "peak with it, and the child's own peak, in the phases it ran)")
    print("(good polls/min counts the polls that began in the phase: the 11 s header phase holds 5 or 6 of them; "
          "the longest gap between the good cluster's successful polls says more there)")
    print()
    for p in phases:
        print(f"{p.name}: good up={p.good[0]}; evil up={p.evil[0]}, last_error: {_short(p.evil[1])}")
        if p.note:
            print(f"  {p.note}")
    print(f"daemon alive and answering /healthz after every phase: {alive}; machine load {loads}")
    if args.keep_work:
        print(f"kept {work}")
    else:
        shutil.rmtree(work, ignore_errors=True)


def _short(text: str | None, width: int = 220) -> str:
    if text is None:
        return "null"
    return text if len(text) <= width else text[:width] + "…"


if __name__ == "__main__":
    main()
