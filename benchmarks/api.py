"""REST API latency under a steady 200 requests/s on the list endpoints, on a real PostgreSQL.

Seeds a throwaway PostgreSQL with 10,000 transactions (plus partitions, lag samples,
episodes and alerts as a busy cluster has them), serves the app with uvicorn in its own
process on 127.0.0.1, and drives the list endpoints open-loop (requests are sent on a
fixed schedule, not when the previous one returns, so a slow server cannot hide its
queueing).  Prints p50/p99 latency and the achieved rate (target: p99 ≤ 50 ms at 200 req/s), plus
the closed-loop capacity and the CPU each request costs the API server, PostgreSQL and the load
generator, so a miss can be told apart from a machine busy with other work.

    .venv/bin/python benchmarks/api.py [--rate 200] [--seconds 20] [--workers 0,2] [--cache off,on] [--no-vegeta]

``--cache off,on`` measures every server without and then with the list endpoints' answer cache
(txnwatch/serve/answer_cache.py), one after the other in the same run on the same seed.

When vegeta (a maintained constant-rate load generator, github.com/tsenart/vegeta, installed with
``go install github.com/tsenart/vegeta/v12@v12.12.0`` through the Go module proxy; the script does
that itself when ``go`` is on PATH) is available, the same server is also attacked by vegeta at the
same rate: first ``/healthz`` (the framework's floor: routing, middleware, JSON, no database),
then the list endpoints round-robin; p50/p99 of both and the API server's CPU per request above
the floor are printed.  The home-made generator's figures stay for comparison.
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


VEGETA_MODULE = "github.com/tsenart/vegeta/v12@v12.12.0"


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
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--workers", default="0,2", help="api.workers values measured one after the other, same run")
    parser.add_argument("--cache", default="off,on", help="the answer cache (api.answer_cache_bytes 0 or its "
                                                              "default), each measured with every --workers value")
    parser.add_argument("--no-vegeta", action="store_true", help="only the home-made generator")
    parser.add_argument("--serve", nargs=4, metavar=("URL", "PORT", "WORKERS", "CACHE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), int(args.serve[2]), args.serve[3] == "on")
        return 0

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


if __name__ == "__main__":
    sys.exit(main())
