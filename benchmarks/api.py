"""REST API reads at 200 requests/s on PostgreSQL: the issue-25 case by default, a seeded database on request.

**The issue's case** (the default): a PostgreSQL (Debian's binaries, as the tests start it), a one-broker
Kafka lab (``txnwatch.lab``) filled by benchmarks/poll.py's raw-protocol builders with hundreds of
transactional ids, open and hanging transactions, partitions and consumer groups, and ``txnwatch run`` on its
defaults against both (15 s polls, the transaction-log tail, the API in the daemon's process, the answer cache,
the metrics port).  After a few polls:

1. ``--burn N`` processes each spin one CPU (the issue's "one CPU of other work": ``--burn 1``);
2. the daemon's and PostgreSQL's CPU are measured for ``--idle`` seconds with no requests (polls, tail and
   render go on): their idle rate;
3. vegeta (github.com/tsenart/vegeta, a maintained **open-loop constant-rate** generator: a request leaves
   every 1/rate s whether or not the others returned, so queueing shows as latency) sends ``--rate`` req/s
   for ``--seconds`` over the list endpoints at their default page size, round-robin;
4. each list endpoint alone at ``--each-rate`` req/s for ``--each-seconds`` (the cached ones, which miss at
   most once a second and once per generation, and those never cached: reports, verification).

Printed: p50/p95/p99/max latency, errors, achieved rate, per-endpoint p50/p99, API CPU per request (the daemon
process's CPU over the window minus its idle rate, divided by the requests), PostgreSQL CPU per request
(likewise), the share of slow requests sent while a poll ran, the load average and the other work on the
machine.  Latency on a shared machine is only as quiet as the machine: CPU per request is the figure to compare.

    .venv/bin/python benchmarks/api.py --burn 1             # the issue's case: 60 s at 200 req/s, one CPU burnt
    .venv/bin/python benchmarks/api.py --quick              # a smaller lab, 20 s: for iteration
    .venv/bin/python benchmarks/api.py --seeded [...]       # the older in-process comparison below

vegeta is taken from PATH or Go's bin directory; when missing and ``go`` is on PATH it is installed with
``go install github.com/tsenart/vegeta/v12@v12.13.0`` (the Go module proxy).

**Seeded** (``--seeded``): seeds a throwaway PostgreSQL with 10,000 transactions (plus partitions, lag samples,
episodes and alerts as a busy cluster has them), serves the app with uvicorn in its own
process on 127.0.0.1 (no Kafka, no polls), and drives the list endpoints open-loop with a home-made asyncio
generator and then vegeta.  Prints p50/p99 latency and the achieved rate, plus
the closed-loop capacity and the CPU each request costs the API server, PostgreSQL and the load
generator.

    .venv/bin/python benchmarks/api.py --seeded [--rate 200] [--seconds 20] [--workers 0,2] [--cache off,on]
        [--no-vegeta]

``--cache off,on`` measures every server without and then with the list endpoints' answer cache
(txnwatch/serve/answer_cache.py), one after the other in the same run on the same seed: first ``/healthz``
(the framework's floor: routing, middleware, JSON, no database), then the list endpoints round-robin.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "service")]

import httpx  # noqa: E402
from sqlalchemy import insert  # noqa: E402

from tests.fixtures.postgres_server import start_postgres  # noqa: E402
from txnwatch.core.vocabulary import TxnState  # noqa: E402
from txnwatch.store import models as m  # noqa: E402
from txnwatch.store.db import make_engine  # noqa: E402
from txnwatch.store.migrate import upgrade  # noqa: E402

CLUSTER = "bench"
TRANSACTIONS = 10_000
TOPICS, PARTITIONS_PER_TOPIC, GROUPS = 50, 12, 60
STATES = [s.value for s in [TxnState.ONGOING] * 3 + [TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT,
                                                     TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT]]
TARGET_P99_MS = 50.0
MAX_IN_FLIGHT = 256

ENDPOINTS = [
    "/api/v1/transactions",
    "/api/v1/transactions?min_age_seconds=60",
    "/api/v1/transactions?state=Ongoing&state=PrepareCommit&sort=transactional_id",
    f"/api/v1/transactions?cluster={CLUSTER}&id_prefix=app-01",
    "/api/v1/transactions?topic=topic-07&limit=50",
    "/api/v1/transactions?hanging=true",
    "/api/v1/hanging",
    "/api/v1/lso-stalls",
    "/api/v1/partitions",
    "/api/v1/consumer-groups",
    "/api/v1/alerts",
    "/api/v1/clusters",
]


def seed(url: str) -> None:
    rnd = random.Random(7)
    now = datetime.now(timezone.utc)
    engine = make_engine(url)
    with engine.begin() as conn:
        cluster_id = conn.execute(insert(m.Cluster).returning(m.Cluster.id), [dict(
            name=CLUSTER, bootstrap_servers="127.0.0.1:9092", up=True, last_poll_at=now, last_success_at=now,
            created_at=now - timedelta(days=1))]).scalar_one()
        conn.execute(insert(m.Poll), [dict(cluster_id=cluster_id, started_at=now - timedelta(seconds=15 * i),
                                           duration_ms=80, ok=i % 50 != 0, error_count=0) for i in range(5760)])
        txns = []
        for i in range(TRANSACTIONS):
            state = rnd.choice(STATES)
            tps = sorted({f"topic-{rnd.randrange(TOPICS):02d}-{rnd.randrange(PARTITIONS_PER_TOPIC)}"
                          for _ in range(rnd.randint(1, 4))})
            tid = f"app-{i % 40:02d}-task-{i:05d}"
            txns.append(dict(cluster_id=cluster_id, source=m.POLL, transactional_id=tid, id_hash=m.id_hash(tid),
                             coordinator_id=i % 3, state=state, producer_id=100_000 + i,
                             producer_epoch=rnd.randrange(5),
                             timeout_ms=60_000, txn_started_at=None if state == TxnState.EMPTY else
                             now - timedelta(seconds=rnd.uniform(0, 900)), partitions=tps,
                             first_seen_at=now - timedelta(hours=2), last_seen_at=now, gone_at=None))
        conn.execute(insert(m.TransactionState), txns)
        for at in (now - timedelta(seconds=15), now):
            conn.execute(insert(m.PartitionOffsetSample), [dict(
                cluster_id=cluster_id, topic=f"topic-{t:02d}", partition=p, sampled_at=at, leader=p % 3,
                high_watermark=10_000 + t * p, last_stable_offset=9_000 + t * p, log_start_offset=0,
                open_transactions=rnd.randrange(3)) for t in range(TOPICS) for p in range(PARTITIONS_PER_TOPIC)])
            conn.execute(insert(m.ConsumerLagSample), [dict(
                cluster_id=cluster_id, group_id=f"group-{g:02d}", topic=f"topic-{g % TOPICS:02d}", partition=p,
                sampled_at=at, committed_offset=8_000, lag_hwm=2_000, lag_lso=1_000, lag_seconds=3.5)
                for g in range(GROUPS) for p in range(PARTITIONS_PER_TOPIC)])
        conn.execute(insert(m.HangingEpisode), [dict(
            cluster_id=cluster_id, incident_key=f"bench/topic-{i:02d}-0/{100_000 + i}", topic=f"topic-{i:02d}",
            partition=0, producer_id=100_000 + i, producer_epoch=1, transactional_id=f"app-{i % 40:02d}-task-{i:05d}",
            reason="no_transactional_id", first_seen_at=now - timedelta(minutes=i), last_seen_at=now,
            resolved_at=None if i % 3 else now) for i in range(40)])
        conn.execute(insert(m.LsoStallEpisode), [dict(
            cluster_id=cluster_id, topic=f"topic-{i % TOPICS:02d}", partition=i % PARTITIONS_PER_TOPIC,
            started_at=now - timedelta(minutes=5 * i), ended_at=None if i < 5 else now - timedelta(minutes=4 * i),
            last_seen_at=now, stalled_lso=9_000, max_gap=1_000) for i in range(200)])
        conn.execute(insert(m.Alert), [dict(
            cluster_id=cluster_id, rule="hanging_transaction", incident_key=f"bench/{i}",
            state=("firing", "pending", "resolved")[i % 3], severity="critical", summary=f"alert {i}", labels={},
            details={}, started_at=now - timedelta(minutes=i), last_seen_at=now) for i in range(500)])
    with engine.begin() as conn:
        conn.exec_driver_sql("ANALYZE")
    engine.dispose()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(url: str, port: int, workers: int, cache: bool) -> None:
    """Runs in the server subprocess: uvicorn in this process (``api.workers: 0``) or ``workers`` API worker
    processes fed by this one's publication (``api.workers: N``, as txnwatch.serve.workers runs them); with
    the list endpoints' answer cache at its default size, or without it (``api.answer_cache_bytes: 0``)."""
    import gc
    import signal
    import threading

    import uvicorn

    from txnwatch.core.config import Settings
    from txnwatch.runtime.publication import make_directory, remove_directory
    from txnwatch.runtime.wiring import build_runtime
    from txnwatch.serve.app import create_app
    from txnwatch.serve.server import DAEMON_HTTP, DAEMON_LOOP, bind
    from txnwatch.serve.workers import WorkerPool

    api: dict[str, int] = {"port": port, "workers": workers} | ({} if cache else {"answer_cache_bytes": 0})
    settings = Settings(database_url=url, api=api,
                        clusters=[{"name": CLUSTER, "bootstrap_servers": ["127.0.0.1:9092"]}])
    if not workers:
        app = create_app(build_runtime(settings, collect=False))
        gc.freeze()  # as txnwatch.serve.server does before serving
        # As txnwatch.serve.server runs it in the daemon's process (TXNWATCH_BENCH_DAEMON_HTTP=h11: the old parser).
        http = os.environ.get("TXNWATCH_BENCH_DAEMON_HTTP", DAEMON_HTTP)
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, loop=DAEMON_LOOP,
                    http=http)
        return
    directory = make_directory()
    runtime = build_runtime(settings, collect=False, publish_to=directory)
    runtime.exposition.start()  # type: ignore[attr-defined]  # the collector's render thread publishes
    pool = WorkerPool(settings, bind("127.0.0.1", port), directory, workers)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    pool.start()
    while not stop.wait(1):
        pool.check()
    pool.stop()
    remove_directory(directory)


@dataclass
class Outcome:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0
    client_cpu_s: float = 0.0
    server_cpu_s: float = 0.0
    postgres_cpu_s: float = 0.0
    machine_cpu_s: float = 0.0  # every process's, from /proc/stat: what is left is other work on the machine
    slow_at_s: list[float] = field(default_factory=list)  # send offsets of requests over the target


VEGETA_MODULE = "github.com/tsenart/vegeta/v12@v12.13.0"


def vegeta_binary() -> str | None:
    """vegeta on PATH or in Go's bin directory; installed through the Go module proxy when go is here."""
    found = shutil.which("vegeta")
    if found or not shutil.which("go"):
        return found
    gobin = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
    candidate = Path(gobin.split(os.pathsep)[0] if gobin else Path.home() / "go") / "bin" / "vegeta"
    if not candidate.exists():
        print(f"installing {VEGETA_MODULE} with go install ...", flush=True)
        if subprocess.run(["go", "install", VEGETA_MODULE]).returncode != 0:
            return None
    return str(candidate) if candidate.exists() else None


def vegeta_attack(binary: str, base: str, paths: list[str], rate: float, seconds: float,
                  server_pid: int, postgres_pid: int) -> dict[str, float]:
    """One constant-rate attack; returns vegeta's own latency figures (ms) and the server's CPU per request."""
    targets = "".join(f"GET {base}{path}\n\n" for path in paths)
    cpu, machine = process_cpu_seconds(server_pid, children=True), machine_cpu_seconds()
    postgres = process_cpu_seconds(postgres_pid, children=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    attack = subprocess.run([binary, "attack", f"-rate={rate:g}/s", f"-duration={seconds:g}s", "-timeout=10s",
                             "-max-workers=256"], input=targets.encode(), capture_output=True, check=True)
    elapsed = time.perf_counter() - started
    cpu = process_cpu_seconds(server_pid, children=True) - cpu
    machine = machine_cpu_seconds() - machine
    postgres = process_cpu_seconds(postgres_pid, children=True) - postgres
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    vegeta_cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report = json.loads(subprocess.run([binary, "report", "-type=json"], input=attack.stdout,
                                       capture_output=True, check=True).stdout)
    lat = report["latencies"]
    return {"p50_ms": lat["50th"] / 1e6, "p99_ms": lat["99th"] / 1e6, "max_ms": lat["max"] / 1e6,
            "requests": float(report["requests"]), "rate": float(report["rate"]),
            "success": float(report["success"]), "cpu_ms_per_request": cpu * 1000 / max(report["requests"], 1),
            "other_cpus": max(0.0, machine - cpu - vegeta_cpu - postgres) / elapsed}



def machine_cpu_seconds() -> float:
    """CPU time spent by everything on the machine (all CPUs, not idle or waiting for I/O)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    busy = sum(fields[:3]) + sum(fields[5:8])  # user nice system, irq softirq steal
    return busy / os.sysconf("SC_CLK_TCK")


def process_cpu_seconds(pid: int, children: bool = False) -> float:
    """CPU of a process; with ``children``, also of its children (PostgreSQL's backends), live ones
    read directly and exited ones from the parent's reaped-children counters."""
    def ticks(p: int, fields: slice) -> int:
        try:
            stat = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0
        return sum(int(v) for v in stat[fields])

    total = ticks(pid, slice(11, 15) if children else slice(11, 13))
    if children:
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += ticks(int(child), slice(11, 13))
    return total / os.sysconf("SC_CLK_TCK")


class KeepAliveGets:
    """GETs over a fixed pool of keep-alive HTTP/1.1 connections, reading only the status and the body.

    The load generator shares the two cores with the server and PostgreSQL: httpx cost about as much CPU
    per request as the API itself, so it measured its own overhead as much as the server's.
    """

    def __init__(self, port: int, size: int) -> None:
        self._port = port
        self._free: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter] | None] = asyncio.Queue()
        for _ in range(size):
            self._free.put_nowait(None)  # opened on first use

    async def get(self, path: str) -> int:
        """The status code; a request that waits for a free connection counts that wait, as a pool would."""
        conn = await self._free.get()
        try:
            if conn is None:
                conn = await asyncio.open_connection("127.0.0.1", self._port)
            reader, writer = conn
            writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            head = await reader.readuntil(b"\r\n\r\n")
            at = head.lower().find(b"\r\ncontent-length:")
            if at < 0:
                raise ValueError("answer without content-length")
            await reader.readexactly(int(head[at + 17:head.index(b"\r\n", at + 2)]))
        except BaseException:
            if conn is not None:
                conn[1].close()
            self._free.put_nowait(None)
            raise
        self._free.put_nowait(conn)
        return int(head[9:12])

    async def close(self) -> None:
        while not self._free.empty():
            conn = self._free.get_nowait()
            if conn is not None:
                conn[1].close()


async def drive(port: int, rate: float, seconds: float, server_pid: int, postgres_pid: int) -> Outcome:
    """Open loop: request i leaves at t0 + i/rate whatever happened to the others, so queueing in the
    server shows up as latency instead of silently lowering the offered rate."""
    out = Outcome()
    client = KeepAliveGets(port, 16)
    t0 = time.perf_counter()
    try:
        async def one(path: str) -> None:
            start = time.perf_counter()
            try:
                status = await asyncio.wait_for(client.get(path), 10.0)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError) as exc:
                out.errors[type(exc).__name__] += 1
                return
            if status == 200:
                latency_ms = (time.perf_counter() - start) * 1000
                out.latencies[path].append(latency_ms)
                if latency_ms > TARGET_P99_MS:
                    out.slow_at_s.append(start - t0)
            else:
                out.errors[f"HTTP {status}"] += 1

        for path in ENDPOINTS:  # warm up connections, caches and the query plans
            for _ in range(5):
                await one(path)
        out.latencies.clear()
        out.errors.clear()
        tasks: set[asyncio.Task[None]] = set()
        total = int(rate * seconds)
        cpu0, server0 = time.process_time(), process_cpu_seconds(server_pid, children=True)
        postgres0, machine0 = process_cpu_seconds(postgres_pid, children=True), machine_cpu_seconds()
        out.slow_at_s.clear()
        t0 = time.perf_counter()
        for i in range(total):
            delay = t0 + i / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if len(tasks) >= MAX_IN_FLIGHT:  # the server is far behind: stop piling on, count it
                out.errors["not sent: too many in flight"] += 1
                continue
            task = asyncio.create_task(one(ENDPOINTS[i % len(ENDPOINTS)]))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait(tasks, timeout=15)
        out.elapsed = time.perf_counter() - t0
        out.client_cpu_s = time.process_time() - cpu0
        out.server_cpu_s = process_cpu_seconds(server_pid, children=True) - server0
        out.postgres_cpu_s = process_cpu_seconds(postgres_pid, children=True) - postgres0
        out.machine_cpu_s = machine_cpu_seconds() - machine0
        for task in list(tasks):
            task.cancel()
            out.errors["unfinished"] += 1
    finally:
        await client.close()
    return out


async def closed_loop(port: int, seconds: float, concurrency: int) -> float:
    """Requests/s the server sustains when each client waits for its answer: the ceiling the open-loop
    rate is measured against on this machine."""
    done = 0
    client = KeepAliveGets(port, concurrency)
    deadline = time.perf_counter() + seconds

    async def worker(offset: int) -> None:
        nonlocal done
        i = offset
        while time.perf_counter() < deadline:
            await client.get(ENDPOINTS[i % len(ENDPOINTS)])
            done += 1
            i += concurrency

    start = time.perf_counter()
    try:
        await asyncio.gather(*(worker(k) for k in range(concurrency)))
    finally:
        await client.close()
    return done / (time.perf_counter() - start)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, default=None, help="measured window (default 60; --quick 20; "
                                                                     "--seeded 20)")
    parser.add_argument("--burn", type=int, default=0, help="processes spinning one CPU each during the window")
    parser.add_argument("--idle", type=float, default=None, help="seconds of the daemon's idle CPU measured first "
                                                                  "(default 30, two polls; --quick 15)")
    parser.add_argument("--each-rate", type=float, default=50, help="each endpoint alone at this rate ...")
    parser.add_argument("--each-seconds", type=float, default=None, help="... for this long (default 10, --quick 4; "
                                                                          "0 skips)")
    parser.add_argument("--warmup-polls", type=int, default=3, help="daemon polls before measuring")
    parser.add_argument("--quick", action="store_true", help="a smaller lab and shorter windows, for iteration")
    parser.add_argument("--keep", action="store_true", help="keep the run's files (daemon log, config)")
    parser.add_argument("--seeded", action="store_true", help="the seeded in-process comparison instead")
    parser.add_argument("--workers", default="0,2", help="--seeded: api.workers values measured one after the other")
    parser.add_argument("--cache", default="off,on", help="--seeded: the answer cache (api.answer_cache_bytes 0 or "
                                                          "its default), each measured with every --workers value")
    parser.add_argument("--no-vegeta", action="store_true", help="--seeded: only the home-made generator")
    parser.add_argument("--serve", nargs=4, metavar=("URL", "PORT", "WORKERS", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), int(args.serve[2]), args.serve[3] == "on")
        return 0
    if not args.seeded:
        args.seconds = args.seconds or (20 if args.quick else 60)
        args.idle = args.idle or (15 if args.quick else 30)
        args.each_seconds = args.each_seconds if args.each_seconds is not None else (4 if args.quick else 10)
        return lab_main(args)
    args.seconds = args.seconds or 20

    server = start_postgres()
    vegeta = None if args.no_vegeta else vegeta_binary()
    ok = True
    try:
        url = server.create_database("bench")
        upgrade(url)
        t = time.perf_counter()
        seed(url)
        print(f"seeded {TRANSACTIONS} transactions, {TOPICS * PARTITIONS_PER_TOPIC} partitions, "
              f"{GROUPS} groups in {time.perf_counter() - t:.1f}s")
        postmaster = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
        for cache in args.cache.split(","):
            for workers in (int(w) for w in args.workers.split(",")):
                print(f"\n=== api.workers: {workers} " + ("(uvicorn in the daemon's process)" if not workers else
                                                          f"({workers} API worker processes)")
                      + f", answer cache {cache}")
                ok = measure(url, workers, cache, args.rate, args.seconds, vegeta, postmaster) and ok
    finally:
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
    if vegeta is None and not args.no_vegeta:
        print("\nvegeta not available (no go on PATH?): only the home-made generator's figures above")
    return 0 if ok else 1


def measure(url: str, workers: int, cache: str, rate: float, seconds: float, vegeta: str | None,
            postmaster: int) -> bool:
    """One server (``workers`` as api.workers) under the home-made generator, then vegeta: floor, then lists."""
    port = free_port()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "service")]))
    proc = subprocess.Popen([sys.executable, __file__, "--serve", url, str(port), str(workers), cache], env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.2)
        time.sleep(2 * workers)  # every worker up, not just the first
        capacity = asyncio.run(closed_loop(port, seconds=5, concurrency=8))
        load_before = os.getloadavg()[0]
        outcome = asyncio.run(drive(port, rate, seconds, proc.pid, postmaster))
        load_after = os.getloadavg()[0]
        attacks = {}
        if vegeta is not None:
            attacks["floor /healthz"] = vegeta_attack(vegeta, base, ["/healthz"], rate, seconds, proc.pid, postmaster)
            attacks["list endpoints"] = vegeta_attack(vegeta, base, ENDPOINTS, rate, seconds, proc.pid, postmaster)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=40)
        except subprocess.TimeoutExpired:  # still draining queued requests after an overload
            proc.kill()
            proc.wait()

    everything = [v for values in outcome.latencies.values() for v in values]
    sent = sum(len(v) for v in outcome.latencies.values()) + sum(outcome.errors.values())
    print(f"{'endpoint':<80} {'n':>5} {'p50 ms':>8} {'p99 ms':>8}")
    for path in ENDPOINTS:
        values = outcome.latencies.get(path, [])
        if values:
            print(f"{path:<80} {len(values):>5} {statistics.median(values):>8.1f} {pct(values, 99):>8.1f}")
    done = len(everything)
    print(f"\nhome-made generator: offered {rate:.0f} req/s for {seconds:.0f} s; {done} ok of {sent}, "
          f"errors: {dict(outcome.errors) or 0}")
    print(f"achieved {done / outcome.elapsed:.0f} req/s")
    if everything:
        p50, p99 = statistics.median(everything), pct(everything, 99)
        print(f"latency p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {max(everything):.1f} ms; p99/target = "
              f"{p99 / TARGET_P99_MS:.2f} ({'met' if p99 <= TARGET_P99_MS and not outcome.errors else 'MISSED'})")
    # CPU per request says whether a miss is the code or the machine (2 cores, shared with PostgreSQL
    # and this load generator; other work raises the load average).
    issued = sent - outcome.errors["not sent: too many in flight"]
    per = 1000 / max(issued, 1)
    print(f"closed-loop capacity before the run: {capacity:.0f} req/s (8 concurrent clients)")
    print(f"CPU per request served: API server (all its processes) {outcome.server_cpu_s * per:.1f} ms, PostgreSQL "
          f"{outcome.postgres_cpu_s * per:.1f} ms, load generator {outcome.client_cpu_s * per:.1f} ms; "
          f"load average {load_before:.1f} before, {load_after:.1f} after, {os.cpu_count()} CPUs")
    ours = outcome.server_cpu_s + outcome.postgres_cpu_s + outcome.client_cpu_s
    other = max(0.0, outcome.machine_cpu_s - ours)
    print(f"other work on the machine during the run: {other / outcome.elapsed:.2f} of {os.cpu_count()} CPUs "
          f"(server, PostgreSQL and generator: {ours / outcome.elapsed:.2f})")
    if outcome.slow_at_s:
        # Requests over the target spread over the run mean the server queues; bunched in a few windows they
        # mean the machine (or one pause in the server) stalled everything at once.
        windows = sorted({int(at * 4) / 4 for at in outcome.slow_at_s})
        print(f"requests over {TARGET_P99_MS:.0f} ms: {len(outcome.slow_at_s)}, sent in {len(windows)} of the run's "
              f"{int(outcome.elapsed * 4)} quarter-seconds (at s: {', '.join(f'{w:g}' for w in windows[:12])}"
              f"{' ...' if len(windows) > 12 else ''})")
    if attacks:
        print(f"vegeta at {rate:.0f} req/s for {seconds:.0f} s each, same server, same run:")
        for name, a in attacks.items():
            print(f"  {name:<16} p50 {a['p50_ms']:6.1f} ms  p99 {a['p99_ms']:7.1f} ms  max {a['max_ms']:7.1f} ms  "
                  f"achieved {a['rate']:.0f} req/s  success {a['success']:.1%}  "
                  f"API CPU {a['cpu_ms_per_request']:.1f} ms/request  other work {a['other_cpus']:.2f} CPUs")
        floor, lists = attacks["floor /healthz"], attacks["list endpoints"]
        print(f"  p99/target = {lists['p99_ms'] / TARGET_P99_MS:.2f} "
              f"({'met' if lists['p99_ms'] <= TARGET_P99_MS and lists['success'] == 1 else 'MISSED'}); "
              f"CPU per request above the floor: {lists['cpu_ms_per_request'] - floor['cpu_ms_per_request']:.1f} ms")
    return bool(everything) and not outcome.errors


# -- the case: the daemon on defaults, a lab, PostgreSQL, vegeta, burners ------------------------------

LAB_CLUSTER = "apilab"
#: The list endpoints at their default page size, as a dashboard or a script reads them.
LAB_ENDPOINTS = [
    "/api/v1/transactions",
    "/api/v1/transactions?min_age_seconds=60",
    "/api/v1/transactions?hanging=true",
    "/api/v1/hanging",
    "/api/v1/lso-stalls",
    "/api/v1/partitions",
    "/api/v1/consumer-groups",
    "/api/v1/alerts",
    "/api/v1/clusters",
]
#: List endpoints the answer cache never keeps (written by the pipeline, or asking the brokers' own figures).
UNCACHED_ENDPOINTS = [
    f"/api/v1/reports/{LAB_CLUSTER}/transactions",
    f"/api/v1/reports/{LAB_CLUSTER}/topics",
    f"/api/v1/reports/{LAB_CLUSTER}/lag",
    f"/api/v1/reports/{LAB_CLUSTER}/offenders",
    "/api/v1/verification",
]


@dataclass(frozen=True)
class LabScale:
    partitions: int
    topics: int
    ids: int
    open_txns: int
    hanging: int
    groups: int
    offsets_per_group: int


FULL_LAB = LabScale(partitions=600, topics=30, ids=400, open_txns=60, hanging=6, groups=200, offsets_per_group=10)
QUICK_LAB = LabScale(partitions=200, topics=10, ids=150, open_txns=20, hanging=3, groups=60, offsets_per_group=5)


@dataclass
class Window:
    """CPU and wall of one measured stretch: the daemon's process, PostgreSQL's (postmaster and backends), the
    whole machine's busy CPU, and the load average at both ends."""

    wall_s: float
    daemon_cpu_s: float
    postgres_cpu_s: float
    machine_cpu_s: float
    load: tuple[float, float]


class Meter:
    def __init__(self, daemon_pid: int, postgres_pid: int) -> None:
        self.daemon_pid, self.postgres_pid = daemon_pid, postgres_pid

    def start(self) -> tuple[float, float, float, float, float]:
        return (time.perf_counter(), process_cpu_seconds(self.daemon_pid), process_cpu_seconds(self.postgres_pid, True),
                machine_cpu_seconds(), os.getloadavg()[0])

    def stop(self, began: tuple[float, float, float, float, float]) -> Window:
        t, daemon, postgres, machine, load = began
        return Window(time.perf_counter() - t, process_cpu_seconds(self.daemon_pid) - daemon,
                      process_cpu_seconds(self.postgres_pid, True) - postgres, machine_cpu_seconds() - machine,
                      (load, os.getloadavg()[0]))


@dataclass
class Results:
    """vegeta's results, one row per request: sent at (unix s), status, latency (ms), url, error."""

    sent_s: list[float] = field(default_factory=list)
    status: list[int] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    url: list[str] = field(default_factory=list)
    error: list[str] = field(default_factory=list)
    generator_cpu_s: float = 0.0  # vegeta's own CPU (attack and encode)


def vegeta_results(binary: str, base: str, paths: list[str], rate: float, seconds: float) -> Results:
    """One constant-rate attack, every request's row decoded from ``vegeta encode --to csv``."""
    import csv
    import io

    targets = "".join(f"GET {base}{path}\n\n" for path in paths)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    attack = subprocess.run([binary, "attack", f"-rate={rate:g}/s", f"-duration={seconds:g}s", "-timeout=10s",
                             "-max-body=0", "-workers=16"], input=targets.encode(), capture_output=True, check=True)
    encoded = subprocess.run([binary, "encode", "--to", "csv"], input=attack.stdout, capture_output=True,
                             check=True).stdout.decode()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = Results(generator_cpu_s=after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    # timestamp (ns), code, latency (ns), bytes out, bytes in, error, body, attack name, seq, method, url, headers
    for row in csv.reader(io.StringIO(encoded)):
        out.sent_s.append(int(row[0]) / 1e9)
        out.status.append(int(row[1]))
        out.latency_ms.append(int(row[2]) / 1e6)
        out.error.append(row[5])
        out.url.append(row[10][len(base):])
    return out


def poll_windows(url: str) -> list[tuple[float, float]]:
    """(start, end) unix seconds of every poll the daemon recorded."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT started_at, duration_ms FROM polls ORDER BY started_at")).all()
    engine.dispose()
    return [(r[0].timestamp(), r[0].timestamp() + r[1] / 1000) for r in rows]


def lab_config(path: Path, url: str, bootstrap: str, port: int) -> None:
    """The daemon's defaults, but for what points it at the lab and PostgreSQL and keeps its files here."""
    import yaml

    path.write_text(yaml.safe_dump({
        "database_url": url,
        "clusters": [{"name": LAB_CLUSTER, "bootstrap_servers": bootstrap.split(",")}],
        "api": {"host": "127.0.0.1", "port": port},
        "retention": {"archive_dir": str(path.parent / "archive")},
    }))


def free_port_pair() -> int:
    """A free port whose next one is free too."""
    while True:
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def burners(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes each spinning one CPU: the other work on the machine.

    Each in a session of its own, as another program would run: with the kernel's autogroup scheduling (on by
    default in most distributions) the CPU is first shared between sessions, and a burner in the benchmark's
    own session would take its CPU from the daemon's share instead of from the machine's."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(n)]


def error_kind(code: int, error: str) -> str:
    """An error without its addresses and ports, so that errors of one kind count together."""
    if code:
        return f"HTTP {code}"
    for kind in ("Client.Timeout exceeded", "connection reset by peer", "connection refused", "EOF"):
        if kind in error:
            return kind
    return error.rsplit(": ", 1)[-1] or "error"


def rate_line(window: Window, idle: Window, requests: int) -> str:
    api = max(0.0, window.daemon_cpu_s - idle.daemon_cpu_s / idle.wall_s * window.wall_s)
    pg = max(0.0, window.postgres_cpu_s - idle.postgres_cpu_s / idle.wall_s * window.wall_s)
    return (f"API CPU {api * 1000 / max(requests, 1):.2f} ms/request (daemon {window.daemon_cpu_s:.1f} CPU-s in "
            f"{window.wall_s:.0f} s, idle rate {idle.daemon_cpu_s / idle.wall_s:.3f} CPU-s/s), PostgreSQL "
            f"{pg * 1000 / max(requests, 1):.2f} ms/request; load {window.load[0]:.1f} -> {window.load[1]:.1f}")


def report_attack(name: str, res: Results, window: Window, idle: Window, rate: float,
                  polls: list[tuple[float, float]]) -> None:
    ok = [lat for lat, code in zip(res.latency_ms, res.status, strict=True) if code == 200]
    errors = Counter(error_kind(code, err)
                     for code, err in zip(res.status, res.error, strict=True) if code != 200)
    span = (max(res.sent_s) - min(res.sent_s)) if len(res.sent_s) > 1 else 0.0
    print(f"{name}: {len(res.status)} requests offered at {rate:g} req/s, achieved "
          f"{len(res.status) / max(span, 1e-9):.0f} req/s; errors {sum(errors.values())}"
          f"{' ' + str(dict(errors)) if errors else ''}")
    if ok:
        p99 = pct(ok, 99)
        print(f"  latency p50 {pct(ok, 50):.1f}  p95 {pct(ok, 95):.1f}  p99 {p99:.1f}  max {max(ok):.1f} ms; "
              f"p99/target {p99 / TARGET_P99_MS:.2f} ({'met' if p99 <= TARGET_P99_MS and not errors else 'MISSED'})")
    print(f"  {rate_line(window, idle, len(res.status))}")
    other = max(0.0, window.machine_cpu_s - window.daemon_cpu_s - window.postgres_cpu_s) / window.wall_s
    print(f"  vegeta {res.generator_cpu_s * 1000 / max(len(res.status), 1):.2f} ms/request; other work on the machine "
          f"(vegeta, burners, the lab, the rest): {other:.2f} of {os.cpu_count()} CPUs")
    slow = [at for at, lat in zip(res.sent_s, res.latency_ms, strict=True) if lat > TARGET_P99_MS]
    if slow:
        in_poll = sum(any(a <= at <= b for a, b in polls) for at in slow)
        t0 = min(res.sent_s)
        seconds = sorted({int(at - t0) for at in slow})
        print(f"  over {TARGET_P99_MS:.0f} ms: {len(slow)}, {in_poll} of them sent while a poll ran; in "
              f"{len(seconds)} distinct seconds (at s: {', '.join(map(str, seconds[:15]))}"
              f"{' ...' if len(seconds) > 15 else ''})")


def per_endpoint(res: Results) -> None:
    by: dict[str, list[float]] = defaultdict(list)
    for url, lat, code in zip(res.url, res.latency_ms, res.status, strict=True):
        if code == 200:
            by[url].append(lat)
    print(f"  {'endpoint':<48} {'n':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
    for url in sorted(by):
        v = by[url]
        print(f"  {url:<48} {len(v):>6} {pct(v, 50):>8.1f} {pct(v, 99):>8.1f} {max(v):>8.1f}")


def wait_for(what: str, check: Any, deadline_s: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + deadline_s
    while not check():
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the daemon exited with {proc.returncode}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not after {deadline_s:.0f} s")
        time.sleep(1)


def lab_main(args: argparse.Namespace) -> int:
    """The issue's case in one run; see the module docstring."""
    import tempfile

    from benchmarks import biglab

    vegeta = vegeta_binary()
    if vegeta is None:
        print("vegeta is needed (go on PATH installs it; or put vegeta on PATH)")
        return 2
    scale = QUICK_LAB if args.quick else FULL_LAB
    started = time.perf_counter()
    server = start_postgres()
    work = Path(tempfile.mkdtemp(prefix="txnwatch-apibench-"))
    lab = daemon = None
    built: dict[str, Any] = {}
    burning: list[subprocess.Popen[bytes]] = []
    try:
        url = server.create_database("apibench")
        upgrade(url)
        postmaster = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
        lab, built = biglab.build_lab(argparse.Namespace(
            brokers=1, ids=scale.ids, open=scale.open_txns, hanging=scale.hanging, partitions=scale.partitions,
            topics=scale.topics, groups=scale.groups, offsets_per_group=scale.offsets_per_group, connections=8))
        port = free_port_pair()  # the metrics port is api.port + 1 by default
        lab_config(work / "txnwatch.yaml", url, built["bootstrap"], port)
        log = open(work / "daemon.log", "wb")  # noqa: SIM115 - the child's for its life
        daemon = subprocess.Popen([str(Path(sys.executable).with_name("txnwatch")), "run", "--config",
                                   str(work / "txnwatch.yaml")], stdout=log, stderr=subprocess.STDOUT, cwd=work)
        base = f"http://127.0.0.1:{port}"
        print(f"txnwatch run (defaults) on PostgreSQL, Kafka {lab.kafka_version}, 1 broker: {scale}", flush=True)
        wait_for(f"{args.warmup_polls} polls", lambda: len(poll_windows(url)) >= args.warmup_polls, 300, daemon)
        first = httpx.get(f"{base}/api/v1/clusters", timeout=10).json()
        print(f"after {len(poll_windows(url))} polls: {first[0] if first else 'no cluster'}", flush=True)
        for path in LAB_ENDPOINTS + UNCACHED_ENDPOINTS:
            answer = httpx.get(base + path, timeout=10)
            body = answer.json()
            items = body.get("items") if isinstance(body, dict) else body
            print(f"  {path:<48} HTTP {answer.status_code}, {len(items) if isinstance(items, list) else '-'} items, "
                  f"{len(answer.content):,} bytes")
        burning = burners(args.burn)
        meter = Meter(daemon.pid, postmaster)
        print(f"{args.burn} CPU burner(s) started; idle window {args.idle:g} s (polls go on, no requests)", flush=True)
        began = meter.start()
        time.sleep(args.idle)
        idle = meter.stop(began)
        print(f"idle: daemon {idle.daemon_cpu_s:.2f} CPU-s, PostgreSQL {idle.postgres_cpu_s:.2f} CPU-s in "
              f"{idle.wall_s:.0f} s; load {idle.load[0]:.1f} -> {idle.load[1]:.1f}", flush=True)
        print(f"\n=== vegeta, open loop, {args.rate:g} req/s for {args.seconds:g} s over {len(LAB_ENDPOINTS)} list "
              f"endpoints at their default page size, {args.burn} CPU(s) burnt", flush=True)
        began = meter.start()
        res = vegeta_results(vegeta, base, LAB_ENDPOINTS, args.rate, args.seconds)
        window = meter.stop(began)
        report_attack("list endpoints", res, window, idle, args.rate, poll_windows(url))
        per_endpoint(res)
        if args.each_seconds > 0:
            print(f"\n=== each list endpoint alone, {args.each_rate:g} req/s for {args.each_seconds:g} s "
                  f"(cached ones miss once a second and once per generation; reports and verification always)")
            print(f"  {'endpoint':<48} {'API ms/req':>10} {'PG ms/req':>9} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}")
            for path in LAB_ENDPOINTS + UNCACHED_ENDPOINTS + ["/healthz"]:
                began = meter.start()
                one = vegeta_results(vegeta, base, [path], args.each_rate, args.each_seconds)
                w = meter.stop(began)
                n = len(one.status)
                api = max(0.0, w.daemon_cpu_s - idle.daemon_cpu_s / idle.wall_s * w.wall_s) * 1000 / max(n, 1)
                pg = max(0.0, w.postgres_cpu_s - idle.postgres_cpu_s / idle.wall_s * w.wall_s) * 1000 / max(n, 1)
                ok = [lat for lat, code in zip(one.latency_ms, one.status, strict=True) if code == 200] or [0.0]
                errors = Counter(error_kind(code, err)
                                 for code, err in zip(one.status, one.error, strict=True) if code != 200)
                print(f"  {path:<48} {api:>10.2f} {pg:>9.2f} {pct(ok, 50):>7.1f} {pct(ok, 99):>7.1f} "
                      f"{sum(errors.values()):>6}{'  ' + str(dict(errors.most_common(2))) if errors else ''}",
                      flush=True)
        print(f"\nwhole run {time.perf_counter() - started:.0f} s wall; load average now "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
        return 0
    finally:
        for proc in burning:
            proc.kill()
            proc.wait()
        if daemon is not None:
            daemon.terminate()
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if lab is not None:
            lab.down()
            shutil.rmtree(built["lab_dir"], ignore_errors=True)
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
        if args.keep:
            print(f"kept the run's files in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
