"""txnwatch beside its peers, kafka_exporter v1.9.0 and KMinion v2.3.5, on one lab in one run (issue 25).

The lab: Kafka 4.1.1 (3 brokers, replication 1, no proxy), 2,000 partitions over 50 topics plus the workload's
9, 300 consumer groups committing offset 0 on 40 partitions each (benchmarks/fixture.py), and the lab's
``steady`` workload: three transactional producers (two kafka-python, one Kafka's own Java producer, plus the
consume-transform-produce loop) and their three groups.  Then, each on its defaults, against the same brokers:

* ``txnwatch run`` with a minimal config (the cluster, SQLite, the API's port, the archive's directory): 15 s
  polls, the transaction-log tail, ``api.workers`` 0, the metrics port;
* kafka_exporter v1.9.0 (``--kafka.server`` per broker, ``--kafka.version=4.0.0``: the newest its pinned
  sarama knows; its default 2.0.0 is below Kafka 4's protocol floor);
* KMinion v2.3.5 (``KAFKA_BROKERS`` and the exporter's port only: its defaults).

Each is scraped every ``--scrape-every`` s at its own offset in the interval, as Prometheus spreads targets
(txnwatch at 0, kafka_exporter at 1/3, KMinion at 2/3; gzip; a tick that comes while the target's previous
scrape runs is missed; a scrape is timed to its body's last byte), txnwatch on its metrics port.  Printed side
by side: CPU-s per minute of each process tree (/proc, over the window; txnwatch's also by process and by
thread name), steady (median) and peak RSS and PSS summed over the tree, scrape p50/p99 (txnwatch's split into
quiet and during its polls, from its ``polls`` table), series, lag agreement (every ``kafka_consumergroup_lag``
series of txnwatch against kafka_exporter's of the same group, topic and partition in the same round, and
against KMinion's ``kminion_kafka_consumer_group_topic_partition_lag``; the workload's live partitions move
between the tools' reads and are counted apart), the ratios to KMinion beside the goals (CPU <= 2x, RSS <= 1.3x,
scrape p50 < 5 ms), the import floors (harness.FLOORS) and txnwatch's storage growth.  After the window
txnwatch alone is scraped every ``--probe-every`` s for ``--probe-seconds``, so that scrapes land in its polls,
with each of its processes' CPU per scrape.  The machine is shared: CPU-seconds are the figures to trust.

The peers are Go programs built once from their tagged source, outside the repository, into
``$TXNWATCH_PEERS_DIR`` (default ``~/.cache/txnwatch/peers``) as ``bin/<name>-<version>``.  When a binary is
missing the script tries ``go install <module>@<version>``; when the module proxy refuses that version, it runs
``go build`` in ``src/<name>-<version>/``, the tag's source tree unpacked there by hand (``git archive v1.9.0`` of
the project's repository), its dependencies coming from the module proxy.  Nothing of theirs is ever written
into this repository.  ``$GO`` names the go command (default: ``go`` on PATH).

    .venv/bin/python benchmarks/peers.py                          # the issue's lab, 5 minutes measured (~10 min)
    .venv/bin/python benchmarks/peers.py --scale 0.1 --minutes 1  # a quick check on a tenth of it
    .venv/bin/python benchmarks/peers.py --skip-peers             # txnwatch alone (no Go needed)
    .venv/bin/python benchmarks/peers.py --baseline main~3        # and that revision's txnwatch beside this one
    .venv/bin/python benchmarks/peers.py --keep-lab               # leave the lab up (poll.py --bootstrap uses it)
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import fixture, harness
from benchmarks.harness import Daemon, pct

GOAL_CPU_RATIO, GOAL_RSS_RATIO, GOAL_SCRAPE_P50_MS = 2.0, 1.3, 5.0
CLUSTER = "peers"
LIVE_TOPICS = {f"txnwatch-steady-{s}" for s in ("input", "output", "java")}  # the steady workload's
KAFKA_EXPORTER_KAFKA_VERSION = "4.0.0"  # sarama v1.45's newest; its default 2.0.0 is below Kafka 4's floor


@dataclass(frozen=True)
class Peer:
    name: str
    module: str
    version: str


KAFKA_EXPORTER = Peer("kafka_exporter", "github.com/danielqsj/kafka_exporter", "v1.9.0")
KMINION = Peer("kminion", "github.com/cloudhut/kminion/v2", "v2.3.5")  # the module path its go.mod declares


def ensure_peer(peer: Peer) -> Path | None:
    """The peer's binary, built once (go install, else go build of its unpacked tag); None when neither works."""
    root = Path(os.environ.get("TXNWATCH_PEERS_DIR", Path.home() / ".cache" / "txnwatch" / "peers"))
    binary = root / "bin" / f"{peer.name}-{peer.version}"
    if binary.exists():
        return binary
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        print(f"  ! {peer.name}: no go command (set GO=...); skipping it")
        return None
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"peers-{peer.name}-") as gobin:
        print(f"  building {peer.name}: go install {peer.module}@{peer.version}", flush=True)
        done = subprocess.run([go, "install", f"{peer.module}@{peer.version}"], env={**os.environ, "GOBIN": gobin},
                              capture_output=True, text=True, cwd=gobin)
        built = [p for p in Path(gobin).iterdir() if p.is_file()]
        if done.returncode == 0 and built:
            shutil.move(str(built[0]), binary)
            return binary
        print(f"    refused: {(done.stderr.strip().splitlines() or ['?'])[-1][:300]}")
    source = root / "src" / f"{peer.name}-{peer.version}"
    if not (source / "go.mod").exists():
        print(f"  ! {peer.name}: no {source}/go.mod (unpack its {peer.version} tag there); skipping it")
        return None
    print(f"  building {peer.name} from {source}: go build", flush=True)
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=source, capture_output=True, text=True)
    if done.returncode:
        print(f"  ! {peer.name}: go build failed: {done.stderr.strip()[-500:]}; skipping it")
        return None
    return binary


@dataclass
class Target:
    """One watched process tree and what was measured on it."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    daemon: Daemon | None = None
    scrapes: list[tuple[float, float, float]] = field(default_factory=list)  # (epoch started, seconds, wire bytes)
    probes: list[tuple[float, float, float]] = field(default_factory=list)  # txnwatch alone, after the window
    failures: list[str] = field(default_factory=list)
    bodies: dict[int, str] = field(default_factory=dict)  # scrape round -> exposition text (the last few)
    series: list[int] = field(default_factory=list)
    sampler: harness.Sampler | None = None
    processes: list[tuple[str, float]] = field(default_factory=list)  # CPU-s per process over the window
    threads: list[tuple[str, float]] = field(default_factory=list)  # CPU-s per thread name over the window
    probe_split: list[tuple[str, float]] = field(default_factory=list)
    missed: int = 0


def start_peer(name: str, command: list[str], url: str, work: Path, env: dict[str, str] | None = None) -> Target:
    with open(work / f"{name}.log", "w") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work,
                                start_new_session=True)
    print(f"  started {name} (pid {proc.pid})", flush=True)
    return Target(name, proc, url)


def ready(target: Target) -> bool:
    if target.daemon is not None:
        return target.daemon.answers()
    try:
        return httpx.get(target.url, timeout=120).status_code == 200
    except httpx.HTTPError:
        return False


# -- scraping ----------------------------------------------------------------------------------------------


def scrape(client: httpx.Client, target: Target, round_no: int, keep: int) -> None:
    """One scrape timed from the request to the body's last byte on the wire (what Prometheus's
    scrape_duration_seconds measures before its own decoding); unzipping comes after the timer."""
    started, t0 = time.time(), time.perf_counter()
    try:
        with client.stream("GET", target.url) as response:
            raw = b"".join(response.iter_raw())
            took = time.perf_counter() - t0
            if response.status_code != 200:
                target.failures.append(f"HTTP {response.status_code}")
                return
            gzipped = response.headers.get("content-encoding", "") == "gzip"
    except httpx.HTTPError as exc:
        target.failures.append(type(exc).__name__)
        return
    target.scrapes.append((started, took, float(len(raw))))
    text = (gzip.decompress(raw) if gzipped else raw).decode("utf-8", "replace")
    target.series.append(sum(1 for line in text.splitlines() if line and not line.startswith("#")))
    target.bodies[round_no] = text
    for old in [r for r in target.bodies if r <= round_no - keep]:
        del target.bodies[old]


#: Where in each interval a target is scraped.  Prometheus spreads its targets (a fixed offset per target): at one
#: instant txnwatch's scrape competed with kafka_exporter's 8 s of collection and KMinion's for two cores, and its
#: p50 measured the machine (13 ms against 1.7 ms alone).  A --baseline txnwatch sits at 1/6.
OFFSET_FRACTION = {"txnwatch": 0.0, "kafka_exporter": 1 / 3, "kminion": 2 / 3}


def scraper(target: Target, t0: float, every: float, end: float, stop: threading.Event) -> None:
    """One target on its own schedule: at t0 + k * every + its offset; a tick during a running scrape is missed."""
    offset = OFFSET_FRACTION.get(target.name, 1 / 6) * every
    with httpx.Client(timeout=300, headers={"Accept-Encoding": "gzip"}) as client:
        k = 0
        while not stop.is_set() and (at := t0 + k * every + offset) < end:
            if stop.wait(max(0.0, at - time.monotonic())):
                return
            scrape(client, target, k, 8)
            k = max(k + 1, int((time.monotonic() - t0 - offset) // every) + 1)
            target.missed = k - len(target.scrapes) - len(target.failures)


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
FAMILIES = {"txnwatch": ("kafka_consumergroup_lag", ("consumergroup", "topic", "partition")),
            "kafka_exporter": ("kafka_consumergroup_lag", ("consumergroup", "topic", "partition")),
            "kminion": ("kminion_kafka_consumer_group_topic_partition_lag", ("group_id", "topic_name", "partition_id"))}


def samples(text: str, family: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for line in text.splitlines():
        if line.startswith(family + "{") and (match := _SAMPLE.match(line)) and match.group(1) == family:
            out.append((dict(_LABEL.findall(match.group(2))), float(match.group(3))))
    return out


def lag_series(text: str, who: str) -> dict[tuple[str, str, str], float]:
    """{(group, topic, partition): lag} of ``who``'s lag family."""
    family, keys = FAMILIES[who]
    return {(labels.get(keys[0], ""), labels.get(keys[1], ""), labels.get(keys[2], "")): value
            for labels, value in samples(text, family)}


def agreement(mine: dict[Any, float], theirs: dict[Any, float]) -> dict[str, tuple[int, int]]:
    """Equal, different, missing on either side: each (outside the live partitions, on them)."""
    def split(keys: Any) -> tuple[int, int]:
        live = sum(1 for k in keys if k[1] in LIVE_TOPICS)
        return len(keys) - live, live

    common = mine.keys() & theirs.keys()
    return {"equal": split([k for k in common if mine[k] == theirs[k]]),
            "different": split([k for k in common if mine[k] != theirs[k]]),
            "missing in txnwatch": split(theirs.keys() - mine.keys()),
            "missing in the peer": split(mine.keys() - theirs.keys())}


# -- the run -----------------------------------------------------------------------------------------------


def measure(targets: list[Target], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    window_s = args.minutes * 60
    before = {t.name: (harness.processes_cpu_s(t.proc.pid), harness.tree_threads_cpu_s(t.proc.pid)) for t in targets}
    for target in targets:
        target.sampler = harness.Sampler(target.proc.pid)
        target.sampler.start()
    storage0, t0 = storage_bytes(work), time.monotonic()
    stop = threading.Event()
    threads = [threading.Thread(target=scraper, args=(t, t0, args.scrape_every, t0 + window_s, stop), daemon=True)
               for t in targets]
    for thread in threads:
        thread.start()
    time.sleep(window_s)
    for target in targets:
        assert target.sampler is not None
        target.sampler.stop()
        processes = harness.processes_cpu_s(target.proc.pid)
        target.processes = [(f"{name} (pid {pid})", cpu - before[target.name][0].get(pid, ("", 0.0))[1])
                            for pid, (name, cpu) in processes.items()]
        target.threads = harness.spent(before[target.name][1], harness.tree_threads_cpu_s(target.proc.pid))
    storage1 = storage_bytes(work)
    stop.set()
    for thread in threads:
        thread.join(timeout=300)
    for target in targets:
        if target.proc.poll() is not None:
            print(f"  ! {target.name} exited {target.proc.returncode} during the window")
    return {"window_s": time.monotonic() - t0, "storage": (storage0, storage1)}


def storage_bytes(work: Path) -> int:
    """txnwatch's SQLite files and archive under the run's directory."""
    return sum(p.stat().st_size for p in [*work.glob("txnwatch.db*"), *(work / "txnwatch-archive").rglob("*")]
               if p.is_file())


def probe(target: Target, seconds: float, every: float) -> None:
    """After the window: txnwatch alone, scraped every ``every`` s, so that enough scrapes land in its polls."""
    before = harness.processes_cpu_s(target.proc.pid)
    end = time.monotonic() + seconds
    with httpx.Client(timeout=120, headers={"Accept-Encoding": "gzip"}) as client:
        while (t0 := time.monotonic()) < end:
            first = len(target.scrapes)
            scrape(client, target, -1, 1)
            target.probes.extend(target.scrapes[first:])
            del target.scrapes[first:]
            time.sleep(max(0.0, every - (time.monotonic() - t0)))
    target.probe_split = [(f"{name} (pid {pid})", cpu - before.get(pid, ("", 0.0))[1])
                          for pid, (name, cpu) in harness.processes_cpu_s(target.proc.pid).items()]


def report(targets: list[Target], result: dict[str, Any], built: dict[str, Any], args: argparse.Namespace,
           kafka_version: str) -> None:
    by = {t.name: t for t in targets}
    ours = by["txnwatch"]
    assert ours.daemon is not None
    polls = ours.daemon.polls()
    minutes = result["window_s"] / 60
    loads = harness.Loads([x for t in targets if t.sampler for x in t.sampler.loads.seen])
    scale = built["scale"]
    print("\n" + "=" * 110)
    print(harness.machine_line(loads) + f"; Kafka {kafka_version}")
    print(f"lab: {args.brokers} brokers, {scale['partitions']:,} partitions in {scale['topics']} topics + the "
          f"workload's 9, {scale['groups']} groups x {scale['offsets_per_group']} committed partitions + the "
          f"workload's 3, the 'steady' workload; set up in {built['setup_s']:.0f} s")
    print(f"window {result['window_s']:.0f} s, scrapes every {args.scrape_every:g} s; txnwatch scraped at {ours.url}")
    names = [t.name for t in targets]
    samplers = {t.name: t.sampler for t in targets if t.sampler is not None}
    cpu = {n: s.cpu_per_minute for n, s in samplers.items()}
    rss = {n: s.steady() for n, s in samplers.items()}
    pss = {n: s.steady(s.pss) for n, s in samplers.items()}

    def q(values: list[float]) -> str:
        return f"{pct(values, .5) * 1000:.1f}/{pct(values, .99) * 1000:.1f}"

    quiet = {n: [s[1] for s in by[n].scrapes if not harness.in_a_poll(s[0], s[1], polls)] for n in names}
    during = {n: [s[1] for s in by[n].scrapes if harness.in_a_poll(s[0], s[1], polls)] for n in names}
    harness.rows(["", *names], [
        ["CPU-s per minute", *(f"{cpu[n]:.2f}" for n in names)],
        ["RSS steady / peak MB (tree)", *(f"{rss[n]:.0f} / {samplers[n].peak():.0f}" for n in names)],
        ["PSS steady / peak MB (tree)", *(f"{pss[n]:.0f} / {samplers[n].peak(samplers[n].pss):.0f}" for n in names)],
        ["scrape p50/p99 ms (all)", *(q([s[1] for s in by[n].scrapes]) for n in names)],
        ["scrape p50/p99 ms, quiet", *(q(quiet[n]) for n in names)],
        ["scrape p50/p99 ms, in a poll", *(q(during[n]) for n in names)],
        ["scrapes quiet/in poll/failed/missed",
         *(f"{len(quiet[n])}/{len(during[n])}/{len(by[n].failures)}/{by[n].missed}" for n in names)],
        ["series (median)", *(f"{statistics.median(by[n].series):,.0f}" if by[n].series else "-" for n in names)],
        ["kB a scrape on the wire (median)",
         *(f"{statistics.median([s[2] for s in by[n].scrapes]) / 1024:,.0f}" if by[n].scrapes else "-" for n in names)],
    ], width=20)
    if ours.probes:
        qp = [p[1] for p in ours.probes if not harness.in_a_poll(p[0], p[1], polls)]
        dp = [p[1] for p in ours.probes if harness.in_a_poll(p[0], p[1], polls)]
        print(f"txnwatch alone, every {args.probe_every:g} s for {args.probe_seconds:g} s after the window: quiet "
              f"p50/p99 {q(qp)} ms (n={len(qp)}), during its polls {q(dp)} ms (n={len(dp)})")
        for what, spent in ours.probe_split:
            print(f"    CPU during the probe: {what} {spent:.2f} s = {spent / len(ours.probes) * 1000:.2f} ms per scrape")
    print("txnwatch's CPU-s per minute by process: " + ", ".join(f"{w} {s / minutes:.2f}" for w, s in ours.processes))
    shown = [(w, s / minutes) for w, s in ours.threads if s / minutes >= 0.005]
    print("  by thread (OS names; threads that ended in the window count in the total only):")
    for i in range(0, len(shown), 4):
        print("    " + ", ".join(f"{w} {s:.3f}" for w, s in shown[i:i + 4]))
    window = [end - start for start, end, _ in polls if start >= time.time() - result["window_s"] - 5]
    if window:
        print(f"txnwatch polls in the window: {len(window)}, median {statistics.median(window):.2f} s, "
              f"max {max(window):.2f} s")
    lag_report(by)
    if "kminion" in by:
        p50 = pct([s[1] for s in ours.scrapes], 0.5) * 1000
        print("goals (issue 25), printed not asserted:")
        for what, value, goal in (("CPU", cpu["txnwatch"] / cpu["kminion"], GOAL_CPU_RATIO),
                                  ("RSS (tree)", rss["txnwatch"] / rss["kminion"], GOAL_RSS_RATIO),
                                  ("PSS (tree, what the pod's cgroup counts)", pss["txnwatch"] / pss["kminion"],
                                   GOAL_RSS_RATIO)):
            print(f"  {what} txnwatch/KMinion {value:.2f}x (goal <= {goal:g}x) -> "
                  f"{'meets' if value <= goal else 'MISSES'}")
        print(f"  scrape p50 {p50:.1f} ms (goal < {GOAL_SCRAPE_P50_MS:g} ms) -> "
              f"{'meets' if p50 < GOAL_SCRAPE_P50_MS else 'MISSES'}")
    goal_mb = GOAL_RSS_RATIO * rss["kminion"] if "kminion" in by else None
    for what, (floor_rss, floor_pss) in harness.import_floors().items():
        print(f"  floor: {what}: RSS {floor_rss:.0f} MB, PSS {floor_pss:.0f} MB"
              + (f" ({floor_rss / goal_mb:.2f}x the RSS goal of {goal_mb:.0f} MB)" if goal_mb else ""))
    grown = result["storage"][1] - result["storage"][0]
    print(f"txnwatch storage (SQLite + archive): +{grown / 2**20:.1f} MB in {result['window_s']:.0f} s = "
          f"{grown / result['window_s'] * 86400 / 2**20:,.0f} MB/day extrapolated (no retention round in a window "
          f"this short)")
    print("=" * 110)


def lag_report(by: dict[str, Target]) -> None:
    ours = by["txnwatch"]
    if ours.bodies:
        omitted = {f"{labels.get('kind')}/{labels.get('reason')}": value for labels, value in
                   samples(ours.bodies[max(ours.bodies)], "txnwatch_cardinality_omitted") if value}
        print(f"txnwatch_cardinality_omitted (its defaults' caps): {omitted or 'nothing left out'}")
    for peer in ("kafka_exporter", "kminion"):
        if peer not in by:
            continue
        rounds = sorted(ours.bodies.keys() & by[peer].bodies.keys())  # ticks both answered
        for round_no in rounds[-2:]:
            a = agreement(lag_series(ours.bodies[round_no], "txnwatch"), lag_series(by[peer].bodies[round_no], peer))
            bad = a["different"][0] + a["missing in txnwatch"][0] + a["missing in the peer"][0]
            print(f"lag agreement with {peer}, round {round_no}: "
                  f"{'every series equal but on the live partitions' if not bad else 'DISAGREE'}; "
                  + "; ".join(f"{k} {v[0]:,} (+{v[1]} live)" for k, v in a.items()))
        if not rounds:
            print(f"lag agreement with {peer}: no tick where both answered")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="measured window")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the lab's partitions and groups")
    parser.add_argument("--skip-peers", action="store_true", help="txnwatch alone")
    parser.add_argument("--keep-lab", action="store_true", help="leave the lab up and the run's files in place")
    parser.add_argument("--scrape-every", type=float, default=15.0, help="seconds between scrape rounds")
    parser.add_argument("--probe-seconds", type=float, default=90.0, help="after the window, txnwatch alone")
    parser.add_argument("--probe-every", type=float, default=0.25)
    parser.add_argument("--warmup-polls", type=int, default=3, help="txnwatch polls before the window")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--baseline", metavar="REF", help="also run the txnwatch of this git revision beside this "
                        "checkout's, on the same lab and virtualenv")
    args = parser.parse_args()
    peers = {} if args.skip_peers else {p.name: b for p in (KAFKA_EXPORTER, KMINION) if (b := ensure_peer(p))}
    scale = fixture.Scale(ids=0, open_txns=0, hanging=0, partitions=max(50, int(2000 * args.scale)), topics=50,
                          groups=max(3, int(300 * args.scale)), offsets_per_group=40)
    work = Path(tempfile.mkdtemp(prefix="txnwatch-peers-"))
    targets: list[Target] = []
    workload = None
    with harness.Lab(brokers=args.brokers, controller_heap_mb=512, verification=False, txn_max_timeout_ms=900_000,
                     keep=args.keep_lab) as lab:
        try:
            built = fixture.fill(lab.bootstrap, scale)
            with open(work / "workload.log", "w") as log:
                workload = subprocess.Popen([str(Path(sys.executable).with_name("txnwatch")), "lab", "workload",
                                             "--scenario", "steady", "--bootstrap-server", lab.bootstrap,
                                             "--report-every", "60"], stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
            clusters = [{"name": CLUSTER, "bootstrap_servers": lab.bootstrap.split(",")}]
            daemon = Daemon.start(work, clusters)
            targets.append(Target("txnwatch", daemon.proc, daemon.url("/metrics"), daemon))
            if args.baseline:
                commit, tree = harness.baseline_tree(args.baseline, work)
                other = Daemon.start(work, clusters, name=f"txnwatch@{commit}", tree=tree)
                targets.append(Target(other.name, other.proc, other.url("/metrics"), other))
            if "kafka_exporter" in peers:
                port = harness.free_port()
                targets.append(start_peer("kafka_exporter", [str(peers["kafka_exporter"]),
                                                             *[f"--kafka.server={b}" for b in lab.bootstrap.split(",")],
                                                             f"--kafka.version={KAFKA_EXPORTER_KAFKA_VERSION}",
                                                             f"--web.listen-address=127.0.0.1:{port}"],
                                          f"http://127.0.0.1:{port}/metrics", work))
            if "kminion" in peers:
                port = harness.free_port()
                env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"),
                       "KAFKA_BROKERS": lab.bootstrap, "EXPORTER_HOST": "127.0.0.1", "EXPORTER_PORT": str(port)}
                targets.append(start_peer("kminion", [str(peers["kminion"])], f"http://127.0.0.1:{port}/metrics",
                                          work, env))
            print(f"waiting for the targets (txnwatch: {args.warmup_polls} polls; run directory {work})", flush=True)
            daemon.wait(polls=args.warmup_polls, deadline_s=900)
            deadline = time.monotonic() + 300
            while not all(ready(t) for t in targets):
                if time.monotonic() > deadline or any(t.proc.poll() is not None for t in targets):
                    raise RuntimeError(f"a target did not come up; see the logs in {work}")
                time.sleep(2)
            for target in targets:
                if target.daemon is not None:
                    target.url = target.daemon.metrics_url()  # the metrics port, as Helm scrapes it
            print(f"measuring for {args.minutes:g} min", flush=True)
            result = measure(targets, args, work)
            if args.probe_seconds > 0:
                probe(targets[0], args.probe_seconds, args.probe_every)
            report(targets, result, built, args, lab.kafka_version)
        finally:
            for target in targets:
                harness.terminate(target.proc)
            if workload is not None and workload.poll() is None:
                workload.send_signal(signal.SIGINT)
                try:
                    workload.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    workload.kill()
            if not args.keep_lab:
                shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
