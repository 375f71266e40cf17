"""One full poll of a real lab: its cost beside kafka-python's own find_hanging_transactions, and inside the daemon.

A lab (``--brokers`` KRaft brokers, pre-KIP-890 so that hanging transactions can be made) is filled by
benchmarks/fixture.py: ``--ids`` transactional ids (``--open`` with an open transaction, ``--hanging`` of those
unknown to their coordinator), ``--partitions`` in ``--topics`` and ``--groups`` committing on
``--offsets-per-group`` partitions each.  ``--bootstrap`` measures a running lab instead (as ``peers.py
--keep-lab`` or ``--keep-lab`` here leaves one).  Then, each side in a fresh interpreter:

* **default**: txnwatch's ``ClusterConnection.poll()`` (median wall and CPU of ``--repeat`` warm polls, each
  round's time, round trips counted, peak RSS and what the polls add over the idle process), the same watching
  no topic (ids and groups only), and kafka-python's ``KafkaAdminClient.find_hanging_transactions()`` on the same
  cluster (its requests counted: it awaits them one by one); each with no added latency and with
  ``--latency-ms`` added per broker by the lab's proxy, alternated call by call, so that load from elsewhere
  drifts into both columns; the implied round trips (difference of the medians / added round trip) cross-check
  the counted ones.  Goals printed, not asserted: poll <= 2 s, <= 5 round trips, RSS <= 300 MB, >= 10x
  find_hanging.
* ``--daemon``: the poll **alone** as the collector polls (the poll window: cyclic GC paused) and as a bare call,
  with the settings the daemon reads from the same config; then **inside** ``txnwatch run`` on that config (SQLite,
  the log tail, alerting, the render) while /metrics is scraped every 4 s and ten REST endpoints are asked at
  2 requests/s, each poll's ``duration_ms`` read back from the daemon's ``polls`` table, its CPU per interval and
  peak RSS from /proc; then alone again.  Goals: poll <= 5 s, RSS <= 1 GB, in-daemon / alone <= 1.2.
  ``--profile`` runs py-spy (``pip install -e '.[bench]'``) on the daemon and prints its samples per thread.

    .venv/bin/python benchmarks/poll.py                 # 10k ids, 5k partitions, 500 groups (~3 min)
    .venv/bin/python benchmarks/poll.py --quick         # 1k ids, 500 partitions, 50 groups
    .venv/bin/python benchmarks/poll.py --daemon --brokers 10 --partitions 80000 --topics 1600 --ids 50000 \\
        --open 500 --hanging 50 --groups 1600 --offsets-per-group 50 --interval 30 --keep-lab
    .venv/bin/python benchmarks/poll.py --daemon --bootstrap HOST:PORT [--profile]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fixture, harness

GOALS = {"poll_s": 2.0, "round_trips": 5, "rss_mb": 300, "vs_find_hanging": 10.0}
DAEMON_GOALS = {"poll_s": 5.0, "rss_mb": 1024, "ratio": 1.2}
CLUSTER = "bench"
API_PATHS = ("/api/v1/clusters", f"/api/v1/clusters/{CLUSTER}", "/api/v1/transactions?limit=50",
             "/api/v1/partitions?limit=100", "/api/v1/consumer-groups?limit=50", "/api/v1/hanging",
             "/api/v1/lso-stalls", "/api/v1/alerts", "/healthz", "/readyz")


# -- children: one tool in a fresh interpreter, alternating latencies call by call -----------------------------


def _measure(call: Callable[[], Any], trips: Callable[[], int], repeat: int, latencies: list[float],
             proxy_port: int | None, rounds: Callable[[], list[float]] | None = None) -> dict[str, Any]:
    """The cold first call, then ``repeat`` warm calls at every latency in turn; memory before and at the end."""
    from txnwatch.lab.proxy import ProxyControl

    idle = harness.memory_mb("self")  # interpreter, txnwatch and kafka-python imported, nothing called yet

    proxy = ProxyControl(proxy_port) if proxy_port else None
    out: dict[str, dict[str, list[Any]]] = {str(lat): defaultdict(list) for lat in latencies}
    trips()
    wall, cpu = time.perf_counter(), time.process_time()
    call()  # cold: bootstrap, connections, coordinators unknown
    cold = {"cold_s": time.perf_counter() - wall, "cold_cpu_s": time.process_time() - cpu, "cold_trips": trips()}
    try:
        for _ in range(repeat):
            for lat in latencies:
                if proxy is not None:
                    proxy.delay(None, lat)
                trips()
                if rounds is not None:
                    rounds()
                wall, cpu = time.perf_counter(), time.process_time()
                call()
                row = out[str(lat)]
                row["wall_s"].append(time.perf_counter() - wall)
                row["cpu_s"].append(time.process_time() - cpu)
                row["trips"].append(trips())
                if rounds is not None:
                    row["rounds_s"].append(rounds())
    finally:
        if proxy is not None:
            proxy.delay(None, 0)
    return {**cold, "by_latency": out, "idle": idle, "peak": harness.memory_mb("self")}


def _time_exchanges() -> Callable[[], list[float]]:
    """Wall time of each exchange (round) of a poll: send, wait for the brokers, decode; the rest of a poll is
    txnwatch folding the answers into the snapshot."""
    from txnwatch.kafka.wire import ManagerWire

    original, spans = ManagerWire.exchange, []

    async def exchange(self: Any, calls: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, calls)
        finally:
            spans.append(time.perf_counter() - started)

    ManagerWire.exchange = exchange  # type: ignore[method-assign]  # instrumenting the wire: time every exchange

    def take() -> list[float]:
        taken = list(spans)
        spans.clear()
        return taken
    return take


def child_txnwatch(bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None,
                   watch_topics: bool = True) -> dict[str, Any]:
    from txnwatch.core.model import TxnState
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    settings = ClusterConnectionSettings(name=CLUSTER, bootstrap_servers=tuple(bootstrap.split(",")),
                                         request_timeout_ms=30_000,
                                         topics_include=() if watch_topics else ("bench-no-such-topic",))
    latest: list[Any] = []
    with ClusterConnection(settings) as connection:
        def poll() -> None:
            latest[:] = [connection.poll()]  # the previous snapshot stays alive while the next is built

        result = _measure(poll, lambda: connection.last_poll_round_trips, repeat, latencies, proxy_port,
                          _time_exchanges())
    snap = latest[0]
    result["seen"] = {"brokers": len(snap.brokers), "listed": len(snap.listed), "described": len(snap.transactions),
                      "open": sum(1 for d in snap.transactions.values() if TxnState(d.state).is_open),
                      "partitions": len(snap.partitions), "groups": len(snap.groups),
                      "group_partitions": sum(len(g.offsets) for g in snap.groups.values()), "errors": len(snap.errors)}
    return result


def child_hanging(bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None) -> dict[str, Any]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-find-hanging", request_timeout_ms=60_000)
    manager, sent = admin._manager, [0]
    original = manager.send

    def send(*args: Any, **kwargs: Any) -> Any:  # it awaits each request before the next: sends are round trips
        sent[0] += 1
        return original(*args, **kwargs)

    manager.send = send

    def trips() -> int:
        value, sent[0] = sent[0], 0
        return value

    found: list[Any] = []
    result = _measure(lambda: found.__setitem__(slice(None), admin.find_hanging_transactions()), trips, repeat,
                      latencies, proxy_port)
    admin.close()
    return {**result, "hanging": len(found)}


def child_alone(config: str, polls: int) -> dict[str, Any]:
    """The poll in a bare process with the daemon's connection settings, as the collector polls and as a bare call."""
    from txnwatch.core.config import load_settings
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    idle = harness.memory_mb("self")["VmHWM"]
    walls, cpus, bare = [], [], []
    latest: list[Any] = []
    with ClusterConnection(ClusterConnectionSettings.from_config(load_settings(config).clusters[0])) as connection:
        for k in range(polls + 1):  # the first poll bootstraps: left out
            cpu = time.process_time()
            with harness.poll_window():
                latest[:] = [connection.poll()]
            if k:
                walls.append(latest[0].duration_ms / 1000)
                cpus.append(time.process_time() - cpu)
                time.sleep(0.5)
                latest[:] = [connection.poll()]  # the bare call, the GC as usual: what the window saves
                bare.append(latest[0].duration_ms / 1000)
            time.sleep(0.5)
    snap = latest[0]
    seen = {"partitions": len(snap.partitions), "described": len(snap.transactions), "groups": len(snap.groups),
            "group_partitions": sum(len(g.offsets) for g in snap.groups.values()), "errors": len(snap.errors)}
    return {"walls_s": walls, "cpus_s": cpus, "bare_s": bare, "hwm_mb": harness.memory_mb("self")["VmHWM"],
            "idle_mb": idle, "seen": seen}


# -- the default: txnwatch's poll beside find_hanging_transactions ----------------------------------------------


def compare_tools(args: argparse.Namespace, lab: harness.Lab, loads: harness.Loads) -> None:
    latencies = [0.0] + ([args.latency_ms] if args.latency_ms and lab.proxy_port else [])
    results: dict[str, dict[str, Any]] = {}
    for kind in ("txnwatch", "txnwatch-ids", "hanging"):
        loads.sample()
        results[kind] = harness.child(__file__, "--child", kind, lab.bootstrap, args.repeat,
                                      ",".join(map(str, latencies)), lab.proxy_port or 0, timeout=600)
        loads.sample()
        print(f"  {kind}: " + ", ".join(f"{statistics.median(r['wall_s']) * 1000:,.0f} ms at +{lat} ms"
                                         for lat, r in results[kind]["by_latency"].items()), flush=True)

    def median(kind: str, lat: float, key: str = "wall_s") -> float:
        return statistics.median(results[kind]["by_latency"][str(lat)][key])

    seen = results["txnwatch"]["seen"]
    print("\n" + "=" * 100)
    print(harness.machine_line(loads))
    print(f"seen by the poll: {seen['brokers']} brokers, {seen['listed']:,} listed / {seen['described']:,} described "
          f"ids ({seen['open']} open), {seen['partitions']:,} partitions, {seen['groups']:,} groups "
          f"({seen['group_partitions']:,} committed partitions), {seen['errors']} request errors")
    print(f"medians of {args.repeat} warm calls per column, each tool in a fresh process, columns alternated call by "
          f"call" + (f"; +{latencies[1]:g} ms one way per broker by the lab proxy" if len(latencies) > 1 else ""))
    columns = [("no added latency" if not lat else f"+{lat:g} ms/broker") for lat in latencies]

    def line(label: str, kind: str, cell: Callable[[dict[str, Any], float], str]) -> list[str]:
        return [label, *(cell(results[kind], lat) for lat in latencies)]

    def ms(kind: str, key: str = "wall_s") -> Callable[[dict[str, Any], float], str]:
        return lambda r, lat: f"{median(kind, lat, key) * 1000:,.0f} ms"

    def trips(r: dict[str, Any], lat: float) -> str:
        counted = r["by_latency"][str(lat)]["trips"]
        return f"{min(counted)}-{max(counted)}" if min(counted) != max(counted) else str(counted[0])

    harness.rows(["", *columns], [
        line("txnwatch poll: wall (median)", "txnwatch", ms("txnwatch")),
        line("  CPU of the polling process", "txnwatch", ms("txnwatch", "cpu_s")),
        line("  round trips (counted)", "txnwatch", trips),
        line("  each round, median ms", "txnwatch", lambda r, lat: " / ".join(
            f"{statistics.median(x[i] for x in r['by_latency'][str(lat)]['rounds_s'] if len(x) > i) * 1000:.0f}"
            for i in range(max(len(x) for x in r["by_latency"][str(lat)]["rounds_s"])))),
        line("  cold first poll", "txnwatch", lambda r, lat: f"{r['cold_s'] * 1000:,.0f} ms"),
        line("  peak RSS (added by the polls)", "txnwatch",
             lambda r, lat: f"{r['peak']['VmHWM']:.0f} MB (+{r['peak']['VmHWM'] - r['idle']['VmHWM']:.0f})"),
        line("ids + groups only: wall", "txnwatch-ids", ms("txnwatch-ids")),
        line("  CPU", "txnwatch-ids", ms("txnwatch-ids", "cpu_s")),
        line("find_hanging_transactions: wall", "hanging", ms("hanging")),
        line("  CPU", "hanging", ms("hanging", "cpu_s")),
        line("  requests awaited one by one", "hanging", trips),
        line("  peak RSS", "hanging", lambda r, lat: f"{r['peak']['VmHWM']:.0f} MB"),
        ["find_hanging / txnwatch poll (wall)",
         *(harness.ratio(median("hanging", lat), median("txnwatch", lat)) for lat in latencies)],
    ], first=40, width=22)
    if len(latencies) > 1:
        rtt = 2 * latencies[1] / 1000
        for kind in results:
            implied = (median(kind, latencies[1]) - median(kind, 0.0)) / rtt
            print(f"implied sequential round trips, {kind}: {implied:.1f} (difference of the medians / {rtt * 1000:g} ms)")
    wall, peak = median("txnwatch", 0.0), results["txnwatch"]["peak"]["VmHWM"]
    worst = max(results["txnwatch"]["by_latency"][str(latencies[-1])]["trips"])
    vs = median("hanging", 0.0) / wall
    print(f"goals, printed not asserted: poll {wall:.2f} s (<= {GOALS['poll_s']:g} s), round trips {worst} "
          f"(<= {GOALS['round_trips']}), peak RSS {peak:.0f} MB (<= {GOALS['rss_mb']}), {vs:.1f}x faster than "
          f"find_hanging (>= {GOALS['vs_find_hanging']:g}x)")
    print("=" * 100)


# -- --daemon: alone, inside txnwatch run, alone again ------------------------------------------------------------


class Load(threading.Thread):
    """A modest load on the daemon: /metrics (gzip) every ``scrape_every_s``, the API's list endpoints round-robin
    at ``api_rps``; latencies kept."""

    def __init__(self, base: str, scrape_every_s: float = 4.0, api_rps: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.base, self.scrape_every_s, self.api_rps = base, scrape_every_s, api_rps
        self.halt = threading.Event()
        self.scrapes: list[float] = []
        self.requests: list[float] = []
        self.failures: Counter[str] = Counter()

    def run(self) -> None:
        import httpx

        next_scrape = next_api = time.monotonic()
        k = 0
        with httpx.Client(base_url=self.base, timeout=30, headers={"Accept-Encoding": "gzip"}) as client:
            while not self.halt.is_set():
                now = time.monotonic()
                for due, path, into in ((next_scrape, "/metrics", self.scrapes),
                                        (next_api, API_PATHS[k % len(API_PATHS)], self.requests)):
                    if now < due:
                        continue
                    started = time.perf_counter()
                    try:
                        if client.get(path).status_code >= 500:
                            self.failures[path] += 1
                        into.append(time.perf_counter() - started)
                    except httpx.HTTPError as exc:
                        self.failures[f"{path} {type(exc).__name__}"] += 1
                    if into is self.scrapes:
                        next_scrape = now + self.scrape_every_s
                    else:
                        k, next_api = k + 1, now + 1 / self.api_rps
                self.halt.wait(max(0.0, min(next_scrape, next_api) - time.monotonic()))


def in_daemon(args: argparse.Namespace, lab: harness.Lab, loads: harness.Loads) -> None:
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-poll-"))
    clusters = [{"name": CLUSTER, "bootstrap_servers": lab.bootstrap.split(","), "request_timeout_ms": 60_000}]
    settings = {"poll_interval_seconds": args.interval, "api": {"workers": args.api_workers}, "log_level": "WARNING"}
    config = work / "alone.json"
    config.write_text(json.dumps({"database_url": f"sqlite:///{work / 'alone.db'}",
                                                "clusters": clusters}))

    def alone() -> dict[str, Any]:
        loads.sample()
        out = harness.child(__file__, "--child", "alone", config, args.polls, timeout=3600)
        print(f"  alone: median {statistics.median(out['walls_s']):.2f} s", flush=True)
        return out

    first = alone()
    daemon = harness.Daemon.start(work, clusters, settings=settings)
    load, spy = Load(daemon.url()), None
    try:
        daemon.wait(polls=args.warmup_polls, deadline_s=1200)
        load.start()
        counted, cpu0, t0 = len(daemon.polls()), harness.tree_cpu_s(daemon.pid), time.monotonic()
        if args.profile:
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(daemon.pid),
                                    "--threads", "--nonblocking", "--rate", "200", "--format", "raw", "--output",
                                    str(work / "daemon.spy"), "--duration", str(int(args.polls * args.interval + 5))],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while len(daemon.polls()) < counted + args.polls:
            if daemon.proc.poll() is not None or time.monotonic() > t0 + args.polls * args.interval * 4 + 600:
                raise RuntimeError(f"the daemon stopped polling; see {daemon.log}")
            loads.sample()
            time.sleep(1)
        cpu_per_s = (harness.tree_cpu_s(daemon.pid) - cpu0) / (time.monotonic() - t0)
        polls = daemon.polls()[counted:counted + args.polls]
        memory = harness.memory_mb(daemon.pid)
    finally:
        load.halt.set()
        if spy is not None:
            spy.wait(timeout=args.polls * args.interval + 60)
        daemon.stop()
    walls = [end - start for start, end, _ in polls]
    print(f"  daemon: median {statistics.median(walls):.2f} s", flush=True)
    again = alone()
    bare = first["bare_s"] + again["bare_s"]
    alone_walls = first["walls_s"] + again["walls_s"]
    ratio = statistics.median(walls) / statistics.median(alone_walls)
    seen = first["seen"]

    def q(values: list[float]) -> str:
        return (f"median {statistics.median(values):.2f} s (min {min(values):.2f}, max {max(values):.2f}, "
                f"n={len(values)})")

    print("\n" + "=" * 100)
    print(harness.machine_line(loads))
    print(f"seen by the poll: {seen['partitions']:,} partitions, {seen['group_partitions']:,} group partitions in "
          f"{seen['groups']:,} groups, {seen['described']:,} described transactional ids, {seen['errors']} errors")
    print(f"poll alone, as the collector polls: {q(alone_walls)}; CPU median "
          f"{statistics.median(first['cpus_s'] + again['cpus_s']):.2f} s; peak RSS "
          f"{max(first['hwm_mb'], again['hwm_mb']):.0f} MB (idle {first['idle_mb']:.0f} MB)")
    print(f"  the bare call (the GC running during the poll): {q(bare)}")
    print(f"poll inside `txnwatch run` (api.workers {args.api_workers}): {q(walls)}; "
          f"{sum(1 for *_, ok in polls if not ok)} failed")
    print(f"  daemon CPU {cpu_per_s * args.interval:.2f} s per {args.interval} s interval, peak RSS "
          f"{memory.get('VmHWM', 0):.0f} MB (now {memory.get('VmRSS', 0):.0f} MB)")
    if load.scrapes:
        print(f"  /metrics median {statistics.median(load.scrapes) * 1000:.0f} ms, max {max(load.scrapes) * 1000:.0f} "
              f"ms; API median {statistics.median(load.requests or [0]) * 1000:.0f} ms, max "
              f"{max(load.requests or [0]) * 1000:.0f} ms; failures {dict(load.failures) or 'none'}")
    print(f"goals, printed not asserted: poll {statistics.median(walls):.2f} s (<= {DAEMON_GOALS['poll_s']:g} s), "
          f"daemon peak RSS {memory.get('VmHWM', 0):.0f} MB (<= {DAEMON_GOALS['rss_mb']}), in-daemon / alone "
          f"{ratio:.2f} (<= {DAEMON_GOALS['ratio']:g})")
    if args.profile:
        print_spy(work / "daemon.spy")
    print("=" * 100)


def print_spy(path: Path, top: int = 10) -> None:
    """py-spy's raw (collapsed) stacks: samples per thread, and the innermost frames of the busiest threads."""
    if not path.exists():
        print("(py-spy wrote nothing: is ptrace allowed here?)")
        return
    per_thread: Counter[str] = Counter()
    own: dict[str, Counter[str]] = defaultdict(Counter)
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        thread, *frames = stack.split(";")
        per_thread[thread] += int(count)
        if frames:
            own[thread][frames[-1]] += int(count)
    total = sum(per_thread.values()) or 1
    print(f"py-spy on the daemon: {total} samples at 200 Hz (active threads only)")
    for thread, n in per_thread.most_common(8):
        print(f"  {n * 100 / total:5.1f}%  {thread}")
        for frame, c in own[thread].most_common(top):
            print(f"           own {c * 100 / n:5.1f}%  {frame}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1k ids, 500 partitions, 50 groups, 3 repeats")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--ids", type=int, help="transactional ids (default 10000)")
    parser.add_argument("--open", type=int, help="of which with an open transaction (default 200)")
    parser.add_argument("--hanging", type=int, help="of the open ones, unknown to their coordinator (default 20)")
    parser.add_argument("--partitions", type=int, help="partitions, replication 1 (default 5000)")
    parser.add_argument("--topics", type=int, default=5)
    parser.add_argument("--groups", type=int, help="consumer groups with committed offsets (default 500)")
    parser.add_argument("--offsets-per-group", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="one-way latency per broker (0: none)")
    parser.add_argument("--repeat", type=int, help="warm calls per column (default 5)")
    parser.add_argument("--bootstrap", help="a running lab: measure it as it is, no fixture")
    parser.add_argument("--keep-lab", action="store_true", help="leave the lab up for another run (--bootstrap)")
    parser.add_argument("--daemon", action="store_true", help="the poll alone and inside `txnwatch run`")
    parser.add_argument("--polls", type=int, default=6, help="--daemon: measured polls per column")
    parser.add_argument("--warmup-polls", type=int, default=2, help="--daemon: polls left out (the tail catching up)")
    parser.add_argument("--interval", type=int, default=15, help="--daemon: its poll_interval_seconds")
    parser.add_argument("--api-workers", type=int, default=0, help="--daemon: its api.workers")
    parser.add_argument("--profile", action="store_true", help="--daemon: py-spy on the daemon while it polls")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "alone":
            harness.reply(child_alone(rest[0], int(rest[1])))
            return
        bootstrap, repeat, latencies, proxy = rest[0], int(rest[1]), [float(x) for x in rest[2].split(",")], int(rest[3])
        if kind == "hanging":
            harness.reply(child_hanging(bootstrap, repeat, latencies, proxy or None))
        else:
            harness.reply(child_txnwatch(bootstrap, repeat, latencies, proxy or None, watch_topics=kind == "txnwatch"))
        return
    quick = args.quick
    scale = fixture.Scale(ids=args.ids or (1_000 if quick else 10_000), open_txns=args.open or (50 if quick else 200),
                          hanging=args.hanging if args.hanging is not None else (5 if quick else 20),
                          partitions=args.partitions or (500 if quick else 5_000), topics=args.topics,
                          groups=args.groups or (50 if quick else 500), offsets_per_group=args.offsets_per_group)
    args.repeat = args.repeat or (3 if quick else 5)
    loads = harness.Loads()
    # A lab broker's heap is 512 MB: ~13,000 partitions per broker at most (docs/performance.md).
    with harness.Lab(args.bootstrap, brokers=args.brokers, proxy=not args.daemon, controller_heap_mb=512,
                     verification=False, txn_max_timeout_ms=fixture.TXN_TIMEOUT_MS, keep=args.keep_lab) as lab:
        if not args.bootstrap:
            fixture.fill(lab.bootstrap, scale)
        (in_daemon if args.daemon else compare_tools)(args, lab, loads)


if __name__ == "__main__":
    main()
