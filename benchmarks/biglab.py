"""Issue 18 item 2 on a real lab: one poll at the largest size this machine holds, alone and inside the daemon.

Builds a lab cluster (``--brokers`` KRaft brokers, no proxy) and fills it with benchmarks/poll.py's
raw-protocol fixture builders (many connections at once: InitProducerId, AddPartitionsToTxn,
transactional Produce, OffsetCommit with generation -1), then measures, side by side in one run:

* **alone**: ``ClusterConnection.poll()`` in a fresh process of its own, with the connection settings
  the daemon gets from the same YAML file: wall time (the ``duration_ms`` the daemon records too),
  CPU time, peak RSS;
* **in the daemon**: ``txnwatch run`` on the same YAML (SQLite store, the transaction-log tail, alerting,
  the /metrics render, the console) while this process scrapes /metrics and queries the REST API at a
  modest rate; each poll's ``duration_ms`` is read back from the daemon's own ``polls`` table; the daemon's
  CPU per poll interval and its peak RSS from /proc;
* **alone** again (the two columns bracket the daemon, so load from elsewhere drifts into both);
* **synthesised** (benchmarks/scale.py) at the same partitions, group partitions and transactional ids.

Printed next to the goals (one poll <= 5 s, RSS <= 1 GB on 2 cores, in-daemon / alone <= 1.2); nothing
is asserted.  ``--profile`` runs py-spy (``pip install -e '.[bench]'``) on the daemon during its polls
and prints where each thread spent its samples while the poll ran.

Set-up takes minutes at full scale, so the lab can be held between runs:

    python benchmarks/biglab.py --partitions 20000 --ids 20000 --groups 2000      # build, measure, tear down
    python benchmarks/biglab.py --hold lab.json --partitions 20000 ...           # build and keep (Ctrl-C ends)
    python benchmarks/biglab.py --use lab.json [--profile]                       # measure on a held lab
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import poll as fixtures  # the raw-protocol fixture builders

GOAL_POLL_S = 5.0
GOAL_RSS_MB = 1024
GOAL_RATIO = 1.2
CLUSTER = "biglab"
API_PATHS = ("/api/v1/clusters", f"/api/v1/clusters/{CLUSTER}", "/api/v1/transactions?limit=50",
             "/api/v1/partitions?limit=100", "/api/v1/consumer-groups?limit=50", "/api/v1/hanging",
             "/api/v1/lso-stalls", "/api/v1/alerts", "/healthz", "/readyz")


def _status_kb(pid: int | str, field: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the lab ---------------------------------------------------------------------------------------------


def build_lab(args: argparse.Namespace, die_with_parent: bool = True) -> tuple[Any, dict[str, Any]]:
    """Start the lab and fill it; returns the lab and what was built (bootstrap, scale, set-up times).

    ``die_with_parent=False`` lets the lab outlive this process (benchmarks/peers.py --keep-lab)."""
    from kafka.admin import KafkaAdminClient

    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LabSettings, TransactionSettings

    t0 = time.monotonic()
    txn_timeout_ms = 900_000  # open transactions outlive the run (Kafka's default maximum)
    lab_dir = tempfile.mkdtemp(prefix="txnwatch-biglab-")
    print(f"starting a {args.brokers}-broker lab (no proxy) in {lab_dir}", flush=True)
    lab = start_lab(LabSettings(brokers=args.brokers, proxy=False, controller_heap_mb=512,
                                transactions=TransactionSettings(max_timeout_ms=txn_timeout_ms,
                                                                 partition_verification_enable=False)),
                    lab_dir, die_with_parent=die_with_parent, quiet=True)
    up_s = time.monotonic() - t0
    print(f"lab up in {up_s:.0f} s: {lab.bootstrap_servers}", flush=True)
    scale = fixtures.Scale(ids=args.ids, open_txns=args.open, hanging=args.hanging, partitions=args.partitions,
                           topics=args.topics, groups=args.groups, offsets_per_group=args.offsets_per_group)
    admin = KafkaAdminClient(bootstrap_servers=lab.bootstrap_servers, client_id="biglab-setup",
                             request_timeout_ms=300_000)
    admin.describe_cluster()
    brokers = {b.node_id: (b.host, b.port) for b in admin._manager.cluster.brokers()}
    leaders, topics_s = fixtures.create_topics(admin, scale, uuid.uuid4().hex[:6])
    print(f"  CreateTopics: {scale.partitions} partitions in {scale.topics} topics, all led, in {topics_s:.0f} s",
          flush=True)
    built = asyncio.run(fixtures.build_fixture(brokers, leaders, scale, uuid.uuid4().hex[:6], txn_timeout_ms,
                                               args.connections))
    admin.close()
    setup_s = time.monotonic() - t0
    print(f"fixture ready after {setup_s:.0f} s in all", flush=True)
    return lab, {"bootstrap": lab.bootstrap_servers, "brokers": args.brokers, "lab_dir": lab_dir,
                 "scale": vars(scale), "lab_up_s": up_s, "topics_s": topics_s, "setup_s": setup_s, **built}


# -- children --------------------------------------------------------------------------------------------


def child_alone(config: str, polls: int) -> dict[str, Any]:
    """The poll in a bare process: the daemon's connection settings, nothing else running."""
    from txnwatch.collect.pollwindow import PROCESS
    from txnwatch.core.config import load_settings
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    settings = load_settings(config)
    idle_kb = _status_kb("self", "VmHWM")
    walls, cpus, raw_walls = [], [], []
    latest: list[Any] = []
    with ClusterConnection(ClusterConnectionSettings.from_config(settings.clusters[0])) as connection:
        for k in range(polls + 1):  # the first poll bootstraps: left out
            cpu = time.process_time()
            with PROCESS.poll():  # as the collector polls: cyclic GC paused (txnwatch.collect.pollwindow)
                latest[:] = [connection.poll()]  # the previous snapshot stays alive while the next is built
            cpu = time.process_time() - cpu
            if k:
                walls.append(latest[0].duration_ms / 1000)
                cpus.append(cpu)
                time.sleep(0.5)
                latest[:] = [connection.poll()]  # the bare call, GC as usual: what the window saves
                raw_walls.append(latest[0].duration_ms / 1000)
            time.sleep(0.5)
    snap = latest[0]
    seen = {"partitions": len(snap.partitions), "listed": len(snap.listed), "described": len(snap.transactions),
            "groups": len(snap.groups), "group_partitions": sum(len(g.offsets) for g in snap.groups.values()),
            "errors": len(snap.errors)}
    return {"walls_s": walls, "cpus_s": cpus, "raw_walls_s": raw_walls, "hwm_mb": _status_kb("self", "VmHWM") / 1024,
            "idle_mb": idle_kb / 1024, "seen": seen}


# -- the daemon ------------------------------------------------------------------------------------------


def write_config(path: Path, bootstrap: str, interval_s: int, db: Path, port: int, api_workers: int) -> None:
    config = {
        "database_url": f"sqlite:///{db}",
        "poll_interval_seconds": interval_s,
        "clusters": [{"name": CLUSTER, "bootstrap_servers": bootstrap.split(","), "request_timeout_ms": 60_000}],
        "api": {"host": "127.0.0.1", "port": port, "workers": api_workers},
        "retention": {"archive_dir": str(path.parent / "archive")},
        "log_level": "WARNING",
    }
    path.write_text(yaml.safe_dump(config))


class Load(threading.Thread):
    """A modest outside load on the daemon: a /metrics scrape (gzip) every ``scrape_every_s`` and the API's
    list endpoints round-robin at ``api_rps``; latencies kept."""

    def __init__(self, base: str, scrape_every_s: float, api_rps: float) -> None:
        super().__init__(daemon=True)
        self.base, self.scrape_every_s, self.api_rps = base, scrape_every_s, api_rps
        self.stop = threading.Event()
        self.scrapes: list[float] = []
        self.requests: list[float] = []
        self.failures: Counter[str] = Counter()

    def run(self) -> None:
        next_scrape = next_api = time.monotonic()
        k = 0
        with httpx.Client(base_url=self.base, timeout=30, headers={"Accept-Encoding": "gzip"}) as client:
            while not self.stop.is_set():
                now = time.monotonic()
                if now >= next_scrape:
                    self._get(client, "/metrics", self.scrapes)
                    next_scrape = now + self.scrape_every_s
                if self.api_rps and now >= next_api:
                    self._get(client, API_PATHS[k % len(API_PATHS)], self.requests)
                    k += 1
                    next_api = now + 1 / self.api_rps
                self.stop.wait(max(0.0, min(next_scrape, next_api if self.api_rps else next_scrape)
                                   - time.monotonic()))

    def _get(self, client: httpx.Client, path: str, into: list[float]) -> None:
        started = time.perf_counter()
        try:
            response = client.get(path)
            if response.status_code >= 500:
                self.failures[f"{path} {response.status_code}"] += 1
        except httpx.HTTPError as exc:
            self.failures[f"{path} {type(exc).__name__}"] += 1
            return
        into.append(time.perf_counter() - started)


def poll_rows(db: Path) -> list[tuple[str, int, bool]]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
        return conn.execute("SELECT started_at, duration_ms, ok FROM polls ORDER BY id").fetchall()


def run_daemon(config: Path, db: Path, port: int, args: argparse.Namespace) -> dict[str, Any]:
    """`txnwatch run` as its own process under a modest load, until ``--polls`` polls past the warm-up."""
    txnwatch = Path(sys.executable).with_name("txnwatch")
    with open(config.with_suffix(".log"), "w") as log:
        proc = subprocess.Popen([str(txnwatch), "run", "--config", str(config)], stdout=log,
                                stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    load = Load(base, args.scrape_every_s, args.api_rps)
    spy: subprocess.Popen[bytes] | None = None
    try:
        deadline = time.monotonic() + 600
        while len(poll_rows_or_empty(db)) < args.warmup_polls:
            if proc.poll() is not None:
                raise RuntimeError(f"txnwatch run exited {proc.returncode}; see {config.with_suffix('.log')}")
            if time.monotonic() > deadline:
                raise RuntimeError("the daemon did not finish its warm-up polls in 10 minutes")
            time.sleep(1)
        load.start()
        start_rows = len(poll_rows(db))
        cpu0, t0 = _cpu_s(proc.pid), time.monotonic()
        if args.profile:
            spy = subprocess.Popen([str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(proc.pid),
                                    "--threads", "--gil" if args.profile_gil else "--nonblocking", "--rate", "200",
                                    "--format", "raw", "--output", str(config.with_suffix(".spy")),
                                    "--duration", str(int(args.polls * args.interval + 5))],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        while len(poll_rows(db)) < start_rows + args.polls:
            if proc.poll() is not None:
                raise RuntimeError(f"txnwatch run exited {proc.returncode}; see {config.with_suffix('.log')}")
            if time.monotonic() > deadline + args.polls * args.interval * 4:
                raise RuntimeError("the daemon stopped polling")
            time.sleep(0.5)
        cpu1, t1 = _cpu_s(proc.pid), time.monotonic()
        rows = poll_rows(db)[start_rows:start_rows + args.polls]
        result = {"walls_s": [r[1] / 1000 for r in rows], "failed": sum(1 for r in rows if not r[2]),
                  "hwm_mb": _status_kb(proc.pid, "VmHWM") / 1024, "rss_mb": _status_kb(proc.pid, "VmRSS") / 1024,
                  "cpu_per_s": (cpu1 - cpu0) / (t1 - t0), "window_s": t1 - t0}
    finally:
        load.stop.set()
        if spy is not None:
            try:
                spy.wait(timeout=args.polls * args.interval + 60)
            except subprocess.TimeoutExpired:
                spy.kill()
        fixtures_terminate(proc)
    result.update(scrapes=load.scrapes, requests=load.requests, failures=dict(load.failures))
    if args.profile:
        result["profile"] = summarise_spy(config.with_suffix(".spy"))
    return result


def poll_rows_or_empty(db: Path) -> list[tuple[str, int, bool]]:
    try:
        return poll_rows(db)
    except sqlite3.Error:  # not created yet
        return []


def fixtures_terminate(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def summarise_spy(path: Path, top: int = 14) -> str:
    """py-spy's raw (collapsed) stacks: samples per thread, and the innermost frames of each busy thread."""
    if not path.exists():
        return "(py-spy wrote nothing: is ptrace allowed here?)"
    per_thread: Counter[str] = Counter()
    own: dict[str, Counter[str]] = defaultdict(Counter)
    incl: dict[str, Counter[str]] = defaultdict(Counter)
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        thread, frames = frames[0], frames[1:]
        n = int(count)
        per_thread[thread] += n
        if frames:
            own[thread][frames[-1]] += n
            for frame in set(frames):
                if "txnwatch/" in frame or "kafka/" in frame or "sqlalchemy/" in frame or "prometheus" in frame:
                    incl[thread][frame] += n
    total = sum(per_thread.values()) or 1
    lines = [f"{total} samples at 200 Hz (active threads only)"]
    for thread, n in per_thread.most_common(8):
        lines.append(f"  {n * 100 / total:5.1f}%  {thread}")
        lines += [f"           own {c * 100 / n:5.1f}%  {f}" for f, c in own[thread].most_common(6)]
        lines += [f"           in  {c * 100 / n:5.1f}%  {f}" for f, c in incl[thread].most_common(top)]
    return "\n".join(lines)


# -- the synthesised figures at the same size -------------------------------------------------------------


def synthesised(partitions: int, group_partitions: int, ids: int) -> dict[str, Any] | None:
    cmd = [sys.executable, str(Path(__file__).with_name("scale.py")), "--child", "--partitions", str(partitions),
           "--group-partitions", str(group_partitions), "--ids", str(ids), "--polls", "3"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if done.returncode:
        print(f"  ! scale.py failed: {done.stderr.strip().splitlines()[-1:]}")
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- main ------------------------------------------------------------------------------------------------


def _child(kind: str, *args: str, timeout: float = 1800) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", kind, *args], capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode:
        raise RuntimeError(f"{kind} child failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure(built: dict[str, Any], args: argparse.Namespace) -> None:
    from txnwatch.lab.ports import free_ports

    work = Path(tempfile.mkdtemp(prefix="txnwatch-biglab-run-"))
    db = work / "txnwatch.db"
    port = free_ports(1)[0]
    config = work / "txnwatch.yaml"
    write_config(config, built["bootstrap"], args.interval, db, port, args.api_workers)
    loads = [os.getloadavg()[0]]
    print(f"measuring: alone ({args.polls} polls), daemon ({args.polls} polls every {args.interval} s after "
          f"{args.warmup_polls} warm-up), alone again; config in {config}", flush=True)
    alone = [_child("alone", str(config), str(args.polls))]
    loads.append(os.getloadavg()[0])
    print(f"  alone: median {statistics.median(alone[0]['walls_s']):.2f} s", flush=True)
    daemon = run_daemon(config, db, port, args)
    loads.append(os.getloadavg()[0])
    print(f"  daemon: median {statistics.median(daemon['walls_s']):.2f} s", flush=True)
    alone.append(_child("alone", str(config), str(args.polls)))
    loads.append(os.getloadavg()[0])
    print(f"  alone again: median {statistics.median(alone[1]['walls_s']):.2f} s", flush=True)
    seen = alone[0]["seen"]
    synth = None if args.no_synth else synthesised(seen["partitions"], seen["group_partitions"], seen["described"])
    loads.append(os.getloadavg()[0])
    report(built, seen, alone, daemon, synth, loads, args)


def _q(values: list[float]) -> str:
    ordered = sorted(values)
    return (f"median {statistics.median(ordered):.2f} s (min {ordered[0]:.2f}, max {ordered[-1]:.2f}, "
            f"n={len(ordered)})")


def report(built: dict[str, Any], seen: dict[str, Any], alone: list[dict[str, Any]], daemon: dict[str, Any],
           synth: dict[str, Any] | None, loads: list[float], args: argparse.Namespace) -> None:
    alone_walls = alone[0]["walls_s"] + alone[1]["walls_s"]
    alone_cpus = alone[0]["cpus_s"] + alone[1]["cpus_s"]
    alone_med, daemon_med = statistics.median(alone_walls), statistics.median(daemon["walls_s"])
    ratio = daemon_med / alone_med
    print()
    print("=" * 100)
    print(f"machine: {os.cpu_count()} cores, load average (1 min) {min(loads):.1f}-{max(loads):.1f} during the run, "
          f"CPython {sys.version.split()[0]}")
    print(f"lab: {built['brokers']} brokers (512 MB heaps, replication 1, no proxy), set up in {built['setup_s']:.0f} s "
          f"(lab {built['lab_up_s']:.0f} s, topics {built['topics_s']:.0f} s, ids {built['init_s']:.0f} s, "
          f"groups {built['commit_s']:.0f} s)")
    print(f"seen by the poll: {seen['partitions']:,} partitions, {seen['group_partitions']:,} group partitions in "
          f"{seen['groups']:,} groups, {seen['listed']:,} listed / {seen['described']:,} described transactional "
          f"ids, {seen['errors']} request errors")
    print()
    print(f"poll alone (fresh process):    {_q(alone_walls)}; CPU median {statistics.median(alone_cpus):.2f} s; "
          f"peak RSS {max(a['hwm_mb'] for a in alone):.0f} MB (idle {alone[0]['idle_mb']:.0f} MB)")
    print(f"    without the poll window (GC running during the poll): "
          f"{_q(alone[0]['raw_walls_s'] + alone[1]['raw_walls_s'])}")
    print(f"    first / second alone run:  {statistics.median(alone[0]['walls_s']):.2f} s / "
          f"{statistics.median(alone[1]['walls_s']):.2f} s")
    print(f"poll inside `txnwatch run` (api.workers {args.api_workers}): {_q(daemon['walls_s'])}; "
          f"{daemon['failed']} failed")
    print(f"    daemon CPU {daemon['cpu_per_s'] * args.interval:.2f} s per {args.interval} s interval "
          f"({daemon['cpu_per_s'] * 100:.0f} % of a core), peak RSS {daemon['hwm_mb']:.0f} MB (now "
          f"{daemon['rss_mb']:.0f} MB)")
    if daemon["scrapes"]:
        print(f"    load: {len(daemon['scrapes'])} /metrics scrapes (median {statistics.median(daemon['scrapes']) * 1000:.0f}"
              f" ms, max {max(daemon['scrapes']) * 1000:.0f} ms), {len(daemon['requests'])} API requests (median "
              f"{statistics.median(daemon['requests'] or [0]) * 1000:.0f} ms, max "
              f"{max(daemon['requests'] or [0]) * 1000:.0f} ms), failures {daemon['failures'] or 'none'}")
    if synth:
        print(f"synthesised (scale.py, same size, no wire): poll {synth['poll_s']:.2f} s (parse {synth['parse_s']:.2f}, "
              f"detect {synth['detect_s']:.2f}), RSS {synth['rss_mb']:.0f} MB")
    print()
    print("goals (issue 18 item 2), printed not asserted:")
    worst = max(daemon_med, alone_med)
    peak = max(daemon["hwm_mb"], *(a["hwm_mb"] for a in alone))
    print(f"  one poll <= {GOAL_POLL_S:g} s: alone {alone_med:.2f} s, in the daemon {daemon_med:.2f} s -> "
          f"{'meets' if worst <= GOAL_POLL_S else 'MISSES'}")
    print(f"  RSS <= {GOAL_RSS_MB} MB: daemon peak {daemon['hwm_mb']:.0f} MB, poll alone peak "
          f"{max(a['hwm_mb'] for a in alone):.0f} MB -> {'meets' if peak <= GOAL_RSS_MB else 'MISSES'}")
    print(f"  in-daemon / alone <= {GOAL_RATIO:g}: {ratio:.2f} -> {'meets' if ratio <= GOAL_RATIO else 'MISSES'}")
    if daemon.get("profile"):
        print()
        print("py-spy on the daemon during its polls:")
        print(daemon["profile"])
    print("=" * 100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=20_000)
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--ids", type=int, default=20_000)
    parser.add_argument("--open", type=int, default=200)
    parser.add_argument("--hanging", type=int, default=20)
    parser.add_argument("--groups", type=int, default=2_000)
    parser.add_argument("--offsets-per-group", type=int, default=10)
    parser.add_argument("--connections", type=int, default=8, help="fixture connections per broker")
    parser.add_argument("--polls", type=int, default=6, help="measured polls per column")
    parser.add_argument("--warmup-polls", type=int, default=2, help="daemon polls left out (tail catching up)")
    parser.add_argument("--interval", type=int, default=15, help="the daemon's poll_interval_seconds")
    parser.add_argument("--scrape-every-s", type=float, default=4.0)
    parser.add_argument("--api-rps", type=float, default=2.0)
    parser.add_argument("--api-workers", type=int, default=0, help="the daemon's api.workers (0: in its process)")
    parser.add_argument("--profile", action="store_true", help="py-spy on the daemon while it polls")
    parser.add_argument("--profile-gil", action="store_true", help="py-spy --gil: only samples holding the GIL")
    parser.add_argument("--no-synth", action="store_true")
    parser.add_argument("--hold", metavar="FILE", help="build the lab, write what was built to FILE, keep it up")
    parser.add_argument("--use", metavar="FILE", help="measure on a lab held by --hold")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        _alone, config, polls = args.child
        print(json.dumps(child_alone(config, int(polls))))
        return
    if args.use:
        measure(json.loads(Path(args.use).read_text()), args)
        return
    lab, built = build_lab(args)
    try:
        if args.hold:
            Path(args.hold).write_text(json.dumps(built))
            print(f"holding the lab ({args.hold}); SIGTERM or Ctrl-C tears it down", flush=True)
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())
            try:
                stop.wait()
            except KeyboardInterrupt:
                pass
        else:
            measure(built, args)
    finally:
        print("tearing the lab down", flush=True)
        lab.down()


if __name__ == "__main__":
    main()
