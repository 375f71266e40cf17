"""Issue 25: txnwatch beside its peers, kafka_exporter v1.9.0 and KMinion v2.3.5, on one lab in one run.

The lab of the issue: Kafka 4.1.1 (``txnwatch.lab``, 3 brokers, no proxy), 2,000 partitions over 50
topics plus the workload's 9, 300 consumer groups committing on 40 partitions each (benchmarks/biglab.py's
raw-protocol fixture), and the lab's ``steady`` workload: three transactional producers (two kafka-python,
one Kafka's own Java producer, plus the consume-transform-produce loop) and their three groups.

Then, each on its defaults and against the same brokers:

* ``txnwatch run`` with a minimal config (the cluster, SQLite, the API on a free port, the archive under
  the run's directory): 15 s polls, the transaction-log tail on, ``api.workers`` 0;
* kafka_exporter v1.9.0 (``--kafka.server`` per broker and ``--kafka.version=4.0.0``, the newest its
  pinned sarama knows: its default 2.0.0 predates the protocol floor of Kafka 4);
* KMinion v2.3.5 (``KAFKA_BROKERS`` and the exporter's port only: consumer groups through the admin API,
  partition granularity, its defaults).

All three are scraped every ``--scrape-every`` seconds, each at its own fixed offset within the interval as
Prometheus spreads targets (txnwatch at 0, kafka_exporter at 1/3, KMinion at 2/3; gzip, as Prometheus asks;
a tick that comes while the target's previous scrape runs is missed, as Prometheus would; a scrape is timed
to its body's last byte, before the scraper unzips it), txnwatch on its metrics port (the one Helm scrapes),
and the script prints side by side: CPU-seconds per minute (utime+stime of the process tree from
/proc/<pid>/stat over the window), steady (median) and peak RSS and PSS (each summed over the process tree:
txnwatch's metrics port and archive jobs are its children), /metrics scrape p50/p99 (txnwatch's
split into quiet and during its polls, from its ``polls`` table), series count, and lag agreement: every
``kafka_consumergroup_lag`` series of txnwatch against kafka_exporter's series of the same group, topic
and partition in the same scrape round, and against KMinion's
``kminion_kafka_consumer_group_topic_partition_lag``.  Partitions the workload writes to move between the
moments each tool reads them, so disagreements are counted apart for those.  Then the ratios
txnwatch/KMinion for CPU and RSS next to the goals (CPU <= 2x, RSS <= 1.3x, scrape p50 < 5 ms), and
txnwatch's storage growth (SQLite files + archive) over the window, extrapolated per day.
The machine is shared: the load average is printed; CPU-seconds, not wall time, are the figures to trust.

The peers are Go programs built from their tagged source once, outside the repository, into
``$TXNWATCH_PEERS_DIR`` (default ``~/.cache/txnwatch/peers``): ``bin/<name>-<version>``.  When a binary is
missing the script tries ``go install <module>@<version>``; when the module proxy refuses that version,
it builds ``src/<name>-<version>/`` (the tag's source tree, unpacked there by hand: ``git archive v1.9.0``
of the project's repository) with ``go build``, its dependencies coming from the module proxy.  Nothing
of theirs is ever written into this repository.  ``$GO`` names the go command (default: ``go`` on PATH).

    .venv/bin/python benchmarks/peers.py                      # the issue's lab, 5 minutes measured
    .venv/bin/python benchmarks/peers.py --scale 0.1 --minutes 1   # a quick check on a tenth of it
    .venv/bin/python benchmarks/peers.py --skip-peers         # txnwatch alone (no Go needed)
    .venv/bin/python benchmarks/peers.py --keep-lab           # leave the lab and the processes' files
    .venv/bin/python benchmarks/peers.py --baseline main~3    # and that revision's txnwatch beside this one

Nothing is asserted.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import biglab  # the lab and its raw-protocol fixture

GOAL_CPU_RATIO = 2.0
GOAL_RSS_RATIO = 1.3
GOAL_SCRAPE_P50_MS = 5.0
CLUSTER = "peers"
KAFKA_EXPORTER_KAFKA_VERSION = "4.0.0"  # sarama v1.45's newest; its default 2.0.0 is below Kafka 4's floor


@dataclass(frozen=True)
class Peer:
    name: str
    module: str
    version: str

    def binary(self, root: Path) -> Path:
        return root / "bin" / f"{self.name}-{self.version}"

    def source(self, root: Path) -> Path:
        return root / "src" / f"{self.name}-{self.version}"


KAFKA_EXPORTER = Peer("kafka_exporter", "github.com/danielqsj/kafka_exporter", "v1.9.0")
KMINION = Peer("kminion", "github.com/cloudhut/kminion/v2", "v2.3.5")  # the module path its go.mod declares


def peers_dir() -> Path:
    return Path(os.environ.get("TXNWATCH_PEERS_DIR", Path.home() / ".cache" / "txnwatch" / "peers"))


def ensure_peer(peer: Peer) -> Path | None:
    """The peer's binary, built once (go install, else go build of its unpacked tag); None when neither works."""
    root = peers_dir()
    binary = peer.binary(root)
    if binary.exists():
        return binary
    go = os.environ.get("GO") or shutil.which("go")
    if not go:
        print(f"  ! {peer.name}: no go command (set GO=...); skipping it")
        return None
    binary.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"peers-{peer.name}-") as gobin:
        cmd = [go, "install", f"{peer.module}@{peer.version}"]
        print(f"  building {peer.name}: GOBIN={gobin} {' '.join(cmd)}", flush=True)
        done = subprocess.run(cmd, env={**os.environ, "GOBIN": gobin}, capture_output=True, text=True, cwd=gobin)
        built = [p for p in Path(gobin).iterdir() if p.is_file()]
        if done.returncode == 0 and built:
            shutil.move(str(built[0]), binary)
            return binary
        print(f"    refused: {(done.stderr.strip().splitlines() or ['?'])[-1][:300]}")
    source = peer.source(root)
    if not (source / "go.mod").exists():
        print(f"  ! {peer.name}: no {source}/go.mod to build from (unpack the {peer.version} tag of its repository "
              f"there); skipping it")
        return None
    print(f"  building {peer.name} from {source}: go build -o {binary} .", flush=True)
    done = subprocess.run([go, "build", "-o", str(binary), "."], cwd=source, capture_output=True, text=True)
    if done.returncode:
        print(f"  ! {peer.name}: go build failed: {done.stderr.strip()[-500:]}; skipping it")
        return None
    return binary


# -- /proc ----------------------------------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None


def tree(root: int) -> list[int]:
    """The process and its live descendants (a daemon that forks API workers or a tail process pays for them)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(int(entry))):
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def tree_cpu_s(root: int) -> float:
    """utime+stime of the live tree plus what its reaped children used (cutime+cstime)."""
    total = 0
    for pid in tree(root):
        if fields := _stat(pid):
            total += sum(int(x) for x in fields[11:15])
    return total / TICK


def per_process_cpu_s(root: int) -> dict[int, tuple[str, float]]:
    """{pid: (what it runs, utime+stime+reaped children)} over the tree: which of txnwatch's processes pays."""
    out = {}
    for pid in tree(root):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except FileNotFoundError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        label = next((w.rsplit("/", 1)[-1] for w in words if "txnwatch" in w and w.rsplit("/", 1)[-1] != "python"),
                     " ".join(w.rsplit("/", 1)[-1] for w in words[:3]))
        if (fields := _stat(pid)) is not None:
            out[pid] = (label[:40], sum(int(x) for x in fields[11:15]) / TICK)
    return out


def per_thread_cpu_s(root: int) -> dict[tuple[int, int], tuple[str, float]]:
    """{(pid, tid): (the thread's OS name, utime+stime)} over the tree.  txnwatch names its threads
    (core/threadnames.py: the poll, the log tail, kafka-python's I/O loops, the render, ...), so this says which
    one pays; a process's main thread carries the process's name."""
    out = {}
    for pid in tree(root):
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except FileNotFoundError:
            continue
        for tid in tids:
            try:
                raw = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except (FileNotFoundError, ProcessLookupError):
                continue
            comm = raw[raw.index("(") + 1:raw.rindex(")")]
            fields = raw.rsplit(")", 1)[1].split()
            out[(pid, int(tid))] = (comm, (int(fields[11]) + int(fields[12])) / TICK)
    return out


def thread_split(before: dict[tuple[int, int], tuple[str, float]], after: dict[tuple[int, int], tuple[str, float]],
                 procs: dict[int, str]) -> list[tuple[str, float]]:
    """CPU-s per thread name over the window, summed over threads of one name (a pool's threads have one each),
    the process's label before it when the tree has more than one process; biggest first."""
    sums: dict[str, float] = {}
    for key, (comm, spent) in after.items():
        label = f"{procs.get(key[0], str(key[0]))}/{comm}" if len(procs) > 1 else comm
        sums[label] = sums.get(label, 0.0) + spent - (before[key][1] if key in before else 0.0)
    return sorted(sums.items(), key=lambda item: -item[1])


def cpu_split(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> list[tuple[str, float]]:
    return [(f"{after[pid][0]} (pid {pid})", after[pid][1] - (before[pid][1] if pid in before else 0.0))
            for pid in after]


def tree_rss_mb(root: int) -> float:
    kb = 0
    for pid in tree(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    kb += int(line.split()[1])
        except FileNotFoundError:
            pass
    return kb / 1024


def tree_pss_mb(root: int) -> float:
    """Proportional set size summed over the tree (/proc/PID/smaps_rollup): pages shared between the tree's
    processes (the interpreter, libraries) count once in all, as the pod's cgroup charges them; the RSS sum
    counts them once per process."""
    kb = 0
    for pid in tree(root):
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    kb += int(line.split()[1])
                    break
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return kb / 1024


# -- the processes ----------------------------------------------------------------------------------------


@dataclass
class Target:
    """One watched process and what was measured on it."""

    name: str
    proc: subprocess.Popen[bytes]
    url: str
    log: Path
    scrapes: list[tuple[float, float, float]] = field(default_factory=list)  # (started epoch, seconds, wire bytes)
    probes: list[tuple[float, float, float]] = field(default_factory=list)  # txnwatch's fast probe after the window
    split: list[tuple[str, float]] = field(default_factory=list)  # CPU-s of each process of the tree, window
    threads: list[tuple[str, float]] = field(default_factory=list)  # CPU-s of each thread name of the tree, window
    probe_split: list[tuple[str, float]] = field(default_factory=list)  # the same over the probe
    failures: list[str] = field(default_factory=list)
    bodies: dict[int, str] = field(default_factory=dict)  # scrape round -> exposition text (the last few)
    series: list[int] = field(default_factory=list)
    rss: list[float] = field(default_factory=list)
    pss: list[float] = field(default_factory=list)
    cpu: tuple[float, float] = (0.0, 0.0)
    missed: int = 0  # ticks that came while a scrape still ran
    where: str = ""  # txnwatch: which of its ports is scraped


def start(name: str, cmd: list[str], url: str, work: Path, env: dict[str, str] | None = None) -> Target:
    log = work / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=work,
                                start_new_session=True)
    print(f"  started {name} (pid {proc.pid}): {' '.join(cmd)}", flush=True)
    return Target(name, proc, url, log)


def stop(target: Target) -> None:
    if target.proc.poll() is None:
        target.proc.send_signal(signal.SIGTERM)
        try:
            target.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            target.proc.kill()
            target.proc.wait()


def write_txnwatch_config(path: Path, bootstrap: str, port: int) -> None:
    """The minimal config: only what points it at the lab and keeps its files in the run's directory."""
    path.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{path.parent / 'txnwatch.db'}",
        "clusters": [{"name": CLUSTER, "bootstrap_servers": bootstrap.split(",")}],
        "api": {"host": "127.0.0.1", "port": port},
        "retention": {"archive_dir": str(path.parent / "archive")},
    }))


def poll_windows(db: Path) -> list[tuple[float, float]]:
    """(start, end) epoch seconds of every poll the daemon recorded."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30) as conn:
            rows = conn.execute("SELECT started_at, duration_ms FROM polls ORDER BY id").fetchall()
    except sqlite3.Error:
        return []
    windows = []
    for started, ms in rows:
        at = datetime.fromisoformat(str(started))
        t0 = (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()  # naive timestamps in the store are UTC
        windows.append((t0, t0 + (ms or 0) / 1000))
    return windows


def storage_bytes(work: Path) -> tuple[int, int]:
    """(SQLite files, archive) bytes under the run's directory."""
    db = sum(p.stat().st_size for p in work.glob("txnwatch.db*") if p.is_file())
    archive = sum(p.stat().st_size for p in (work / "archive").rglob("*") if p.is_file())
    return db, archive


# -- scraping ---------------------------------------------------------------------------------------------


def scrape(client: httpx.Client, target: Target, round_no: int, keep: int) -> None:
    """One scrape, timed from the request to the body's last byte on the wire (what Prometheus's
    scrape_duration_seconds measures up to its own decoding); gunzipping and reading the body come after the
    timer, so the scraper's CPU is not counted as the target's latency."""
    started = time.time()
    t0 = time.perf_counter()
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


PSS_EVERY = 5  # RSS samples (seconds) per PSS sample
#: Where in each interval a target is scraped, as a fraction of it.  Prometheus spreads its targets over the
#: interval (a fixed offset per target, from a hash of its labels), so two targets' scrapes do not start at once:
#: at one instant, txnwatch's scrape competed with kafka_exporter's (8 s of CPU-heavy collection on this lab)
#: and KMinion's for two cores, and its p50 measured the machine, not txnwatch (13 ms against 1.7 ms alone).
OFFSET_FRACTION = {"txnwatch": 0.0, "kafka_exporter": 1 / 3, "kminion": 2 / 3}


def scraper(target: Target, t0: float, every: float, end: float, stop: threading.Event) -> None:
    """One target on its own schedule, as Prometheus scrapes it: at t0 + k * every + its offset
    (``OFFSET_FRACTION`` of the interval); a tick that comes while a scrape still runs is missed.  Bodies of
    round k are compared for lag agreement: the lab's 300 groups do not move, the workload's live partitions
    are counted apart."""
    offset = OFFSET_FRACTION.get(target.name, 1 / 6) * every  # --baseline: between txnwatch and kafka_exporter
    with httpx.Client(timeout=300, headers={"Accept-Encoding": "gzip"}) as client:
        k = 0
        while not stop.is_set():
            at = t0 + k * every + offset
            if at >= end:
                return
            if stop.wait(max(0.0, at - time.monotonic())):
                return
            scrape(client, target, k, 8)
            k = max(k + 1, int((time.monotonic() - t0 - offset) // every) + 1)  # overran: the missed ticks pass
            target.missed = k - len(target.scrapes) - len(target.failures)


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def lag_series(text: str, family: str, keys: tuple[str, str, str]) -> dict[tuple[str, str, str], float]:
    """{(group, topic, partition): lag} of one family, labels named by ``keys``."""
    out = {}
    prefix = family + "{"
    for line in text.splitlines():
        if not line.startswith(prefix):
            continue
        match = _SAMPLE.match(line)
        if not match or match.group(1) != family:
            continue
        labels = dict(_LABEL.findall(match.group(2)))
        out[(labels.get(keys[0], ""), labels.get(keys[1], ""), labels.get(keys[2], ""))] = float(match.group(3))
    return out


FAMILIES = {"txnwatch": ("kafka_consumergroup_lag", ("consumergroup", "topic", "partition")),
            "kafka_exporter": ("kafka_consumergroup_lag", ("consumergroup", "topic", "partition")),
            "kminion": ("kminion_kafka_consumer_group_topic_partition_lag", ("group_id", "topic_name", "partition_id"))}


def agreement(mine: dict[Any, float], theirs: dict[Any, float], live_topics: set[str]) -> dict[str, Any]:
    """Every series of either side: equal, different, or missing on one side; each count split into the
    workload's live partitions (they move between the tools' reads) and the rest (which must all be equal)."""
    def split(keys: Any) -> tuple[int, int]:
        live = sum(1 for k in keys if k[1] in live_topics)
        return len(keys) - live, live

    common = mine.keys() & theirs.keys()
    differ = [k for k in common if mine[k] != theirs[k]]
    equal = [k for k in common if mine[k] == theirs[k]]
    still = [k for k in differ if k[1] not in live_topics]
    (eq, eq_live), (df, df_live) = split(equal), split(differ)
    (mo, mo_live), (mt, mt_live) = split(theirs.keys() - mine.keys()), split(mine.keys() - theirs.keys())
    return {"ours": len(mine), "theirs": len(theirs), "common": len(common), "equal": len(equal),
            "equal_still": eq, "equal_live": eq_live, "differ_still": df, "differ_live": df_live,
            "missing_ours_still": mo, "missing_ours_live": mo_live, "missing_theirs_still": mt,
            "missing_theirs_live": mt_live,
            "examples": [(k, mine[k], theirs[k]) for k in (still or differ)[:3]],
            "only_ours": len(mine.keys() - theirs.keys()), "only_theirs": len(theirs.keys() - mine.keys())}


# -- the run ----------------------------------------------------------------------------------------------


def wait_ready(targets: list[Target], db: Path | None, warmup_polls: int, deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    pending = {t.name for t in targets}
    while pending:
        for target in targets:
            if target.proc.poll() is not None:
                raise RuntimeError(f"{target.name} exited {target.proc.returncode}; see {target.log}")
        for target in [t for t in targets if t.name in pending]:
            # txnwatch is asked what a kubelet asks, /healthz on its API port: /metrics there would load its API
            # stack (serve/front.py), which a daemon scraped on its metrics port, as Helm sets it up, never does.
            url = target.url.replace("/metrics", "/healthz") if target.name.startswith("txnwatch") else target.url
            try:
                ok = httpx.get(url, timeout=120).status_code == 200
            except httpx.HTTPError:
                ok = False
            if ok and (target.name != "txnwatch" or db is None or len(poll_windows(db)) >= warmup_polls):
                pending.discard(target.name)
                print(f"  {target.name} ready", flush=True)
        if time.monotonic() > deadline:
            raise RuntimeError(f"not ready in {deadline_s:.0f} s: {sorted(pending)}")
        time.sleep(2)


def measure(targets: list[Target], args: argparse.Namespace, work: Path) -> dict[str, Any]:
    window_s = args.minutes * 60
    loads = [os.getloadavg()]
    splits, thread_splits = {}, {}
    for target in targets:
        target.cpu = (tree_cpu_s(target.proc.pid), 0.0)
        splits[target.name] = per_process_cpu_s(target.proc.pid)
        thread_splits[target.name] = per_thread_cpu_s(target.proc.pid)
    storage0, t0 = storage_bytes(work), time.monotonic()
    stop_scraping = threading.Event()
    threads = [threading.Thread(target=scraper, args=(t, t0, args.scrape_every, t0 + window_s, stop_scraping),
                                daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    next_rss, next_load = t0, t0
    while (now := time.monotonic()) < t0 + window_s:
        if now >= next_rss:
            for target in targets:
                target.rss.append(tree_rss_mb(target.proc.pid))
                if len(target.rss) % PSS_EVERY == 1:  # smaps_rollup walks the page tables: not every second
                    target.pss.append(tree_pss_mb(target.proc.pid))
            next_rss = now + 1.0
        if now >= next_load:
            loads.append(os.getloadavg())
            next_load = now + 15.0
        time.sleep(0.2)
    elapsed = time.monotonic() - t0
    for target in targets:
        target.cpu = (target.cpu[0], tree_cpu_s(target.proc.pid))
        processes = per_process_cpu_s(target.proc.pid)
        target.threads = thread_split(thread_splits[target.name], per_thread_cpu_s(target.proc.pid),
                                      {pid: label.split()[0] for pid, (label, _) in processes.items()})
        target.split = cpu_split(splits[target.name], processes)
    storage1 = storage_bytes(work)
    stop_scraping.set()
    for thread in threads:
        thread.join(timeout=300)
    loads.append(os.getloadavg())
    for target in targets:
        if target.proc.poll() is not None:
            print(f"  ! {target.name} exited {target.proc.returncode} during the window; see {target.log}")
    return {"window_s": elapsed, "loads": loads, "storage": (storage0, storage1)}


def probe(target: Target, seconds: float, every: float) -> None:
    """After the window: one target scraped every ``every`` s, so that enough scrapes land inside its polls."""
    end = time.monotonic() + seconds
    with httpx.Client(timeout=120, headers={"Accept-Encoding": "gzip"}) as client:
        while time.monotonic() < end:
            t0 = time.monotonic()
            before = len(target.scrapes)
            scrape(client, target, -1, 1)
            target.probes.extend(target.scrapes[before:])
            del target.scrapes[before:]
            time.sleep(max(0.0, every - (time.monotonic() - t0)))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def in_poll(at: float, took: float, windows: list[tuple[float, float]]) -> bool:
    return any(start <= at + took and at <= end for start, end in windows)


def report(targets: list[Target], result: dict[str, Any], built: dict[str, Any], args: argparse.Namespace,
           db: Path, started: float, commit: str) -> None:
    by = {t.name: t for t in targets}
    minutes = result["window_s"] / 60
    windows = poll_windows(db)
    one_min = [load[0] for load in result["loads"]]
    print()
    print("=" * 110)
    print(f"txnwatch {commit}, Kafka {built.get('kafka_version', '4.1.1')}, {os.cpu_count()} cores, load average "
          f"(1 min) {min(one_min):.1f}-{max(one_min):.1f} over the window (5 min at the end: "
          f"{result['loads'][-1][1]:.1f}), CPython {sys.version.split()[0]}")
    scale = built["scale"]
    print(f"lab: {built['brokers']} brokers, {scale['partitions']:,} partitions in {scale['topics']} topics + the "
          f"workload's 9, {scale['groups']} groups x {scale['offsets_per_group']} committed partitions + the "
          f"workload's 3 groups, the 'steady' workload (3 transactional producers); set up in {built['setup_s']:.0f} s")
    if len(targets) > 1:
        print(f"peers: kafka_exporter {KAFKA_EXPORTER.version} (--kafka.version={KAFKA_EXPORTER_KAFKA_VERSION}), "
              f"KMinion {KMINION.version}, built from source (Go)")
    print("txnwatch on its defaults (15 s polls, the log tail, SQLite)")
    print(f"window: {result['window_s']:.0f} s wall, scrapes every {args.scrape_every:g} s; wall since start "
          f"{time.monotonic() - started:.0f} s")
    print()
    names = [t.name for t in targets]
    head = f"{'':34}" + "".join(f"{n:>18}" for n in names)
    print(head)

    def row(label: str, cells: list[str]) -> None:
        print(f"{label:34}" + "".join(f"{c:>18}" for c in cells))

    cpu = {t.name: (t.cpu[1] - t.cpu[0]) / minutes for t in targets}
    steady = {t.name: statistics.median(t.rss) if t.rss else float("nan") for t in targets}
    peak = {t.name: max(t.rss) if t.rss else float("nan") for t in targets}
    row("CPU-s per minute", [f"{cpu[n]:.2f}" for n in names])
    row("CPU-s in the window", [f"{by[n].cpu[1] - by[n].cpu[0]:.1f}" for n in names])
    row("RSS steady (median) MB", [f"{steady[n]:.0f}" for n in names])
    row("RSS peak MB", [f"{peak[n]:.0f}" for n in names])
    pss = {t.name: statistics.median(t.pss) if t.pss else float("nan") for t in targets}
    row("PSS steady (median) MB", [f"{pss[n]:.0f}" for n in names])
    row("PSS peak MB", [f"{max(by[n].pss) if by[n].pss else float('nan'):.0f}" for n in names])
    if "txnwatch" in by:
        print(f"txnwatch scraped on {by['txnwatch'].where} ({by['txnwatch'].url}); every scrape timed to its body's "
              "last byte")
    for label, pick in (("scrape p50 ms (all)", lambda t: [s[1] for s in t.scrapes]),):
        row(label, [f"{pct(pick(by[n]), 0.5) * 1000:.1f}" for n in names])
        row("scrape p99 ms (all)", [f"{pct(pick(by[n]), 0.99) * 1000:.1f}" for n in names])
    quiet = {n: [s[1] for s in by[n].scrapes if not in_poll(s[0], s[1], windows)] for n in names}
    during = {n: [s[1] for s in by[n].scrapes if in_poll(s[0], s[1], windows)] for n in names}
    row("scrape p50/p99 ms, quiet", [f"{pct(quiet[n], .5) * 1000:.1f}/{pct(quiet[n], .99) * 1000:.1f}" for n in names])
    row("scrape p50/p99 ms, in a poll", [f"{pct(during[n], .5) * 1000:.1f}/{pct(during[n], .99) * 1000:.1f}"
                                         for n in names])
    row("scrapes quiet/in poll/failed/missed", [f"{len(quiet[n])}/{len(during[n])}/{len(by[n].failures)}/{by[n].missed}"
                                                 for n in names])
    row("series (median)", [f"{statistics.median(by[n].series):,.0f}" if by[n].series else "-" for n in names])
    row("scrape kB on the wire (median)", [f"{statistics.median([s[2] for s in by[n].scrapes]) / 1024:,.0f}"
                                          if by[n].scrapes else "-" for n in names])
    if "txnwatch" in by and by["txnwatch"].probes:
        probes = by["txnwatch"].probes
        q = [p[1] for p in probes if not in_poll(p[0], p[1], windows)]
        d = [p[1] for p in probes if in_poll(p[0], p[1], windows)]
        print(f"txnwatch alone, scraped every {args.probe_every:g} s for {args.probe_seconds:g} s after the window: "
              f"quiet p50 {pct(q, .5) * 1000:.1f} ms p99 {pct(q, .99) * 1000:.1f} ms (n={len(q)}); during its polls "
              f"p50 {pct(d, .5) * 1000:.1f} ms p99 {pct(d, .99) * 1000:.1f} ms (n={len(d)})")
        for label, spent in by["txnwatch"].probe_split:
            print(f"    CPU during the probe: {label} {spent:.2f} s = {spent / len(probes) * 1000:.2f} ms per scrape "
                  f"if all of it were serving (load-independent)")
    if "txnwatch" in by and len(by["txnwatch"].split) > 1:
        print("txnwatch's CPU-s per minute by process: " + ", ".join(f"{label} {spent / minutes:.2f}"
                                                                    for label, spent in by["txnwatch"].split))
    if "txnwatch" in by and by["txnwatch"].threads:
        t = by["txnwatch"]
        shown = [(label, spent) for label, spent in t.threads if spent / minutes >= 0.005]
        print("txnwatch's CPU-s per minute by thread (OS names; threads that ended in the window are only in the "
              f"total, {(sum(s for _, s in t.threads)) / minutes:.2f} of {(t.cpu[1] - t.cpu[0]) / minutes:.2f}):")
        for i in range(0, len(shown), 4):
            print("    " + ", ".join(f"{label} {spent / minutes:.3f}" for label, spent in shown[i:i + 4]))
    if "txnwatch" in by:
        polls = [w for w in windows if w[0] >= time.time() - result["window_s"] - 5]
        durations = [end - start for start, end in polls]
        if durations:
            print(f"txnwatch polls in the window: {len(durations)}, duration median {statistics.median(durations):.2f} s "
                  f"max {max(durations):.2f} s")
    print()
    lag_report(by, built)
    print()
    if "txnwatch" in by and "kminion" in by:
        print("goals (issue 25), printed not asserted:")
        c, r = cpu["txnwatch"] / cpu["kminion"], steady["txnwatch"] / steady["kminion"]
        pss_ratio = pss["txnwatch"] / pss["kminion"]
        scrapes = [s[1] for s in by["txnwatch"].scrapes]
        p50, p99 = pct(scrapes, 0.5) * 1000, pct(scrapes, 0.99) * 1000
        print(f"  CPU txnwatch/KMinion {c:.2f}x (goal <= {GOAL_CPU_RATIO:g}x) -> {'meets' if c <= GOAL_CPU_RATIO else 'MISSES'}")
        print(f"  RSS (sum over the process tree) txnwatch/KMinion {steady['txnwatch']:.0f}/{steady['kminion']:.0f} MB "
              f"= {r:.2f}x (goal <= {GOAL_RSS_RATIO:g}x) -> {'meets' if r <= GOAL_RSS_RATIO else 'MISSES'}")
        print(f"  PSS (sum over the process tree: what the pod's cgroup counts, shared pages once) txnwatch/KMinion "
              f"{pss['txnwatch']:.0f}/{pss['kminion']:.0f} MB = {pss_ratio:.2f}x (goal <= {GOAL_RSS_RATIO:g}x) -> "
              f"{'meets' if pss_ratio <= GOAL_RSS_RATIO else 'MISSES'}")
        print(f"  scrape p50 {p50:.1f} ms, p99 {p99:.1f} ms on {by['txnwatch'].where} (goal p50 < "
              f"{GOAL_SCRAPE_P50_MS:g} ms) -> {'meets' if p50 < GOAL_SCRAPE_P50_MS else 'MISSES'}")
        if "kafka_exporter" in by:
            print(f"  (txnwatch/kafka_exporter: CPU {cpu['txnwatch'] / cpu['kafka_exporter']:.2f}x, "
                  f"RSS {steady['txnwatch'] / steady['kafka_exporter']:.2f}x)")
    if "txnwatch" in by:  # what an interpreter holds after the imports alone, with or without the peers
        goal_mb = GOAL_RSS_RATIO * steady["kminion"] if "kminion" in by else None
        for label, (rss, pss_mb) in import_floors().items():
            print(f"  floor: {label}: RSS {rss:.0f} MB, PSS {pss_mb:.0f} MB"
                  + (f" ({rss / goal_mb:.2f}x the RSS goal of {goal_mb:.0f} MB)" if goal_mb else ""))
    if "txnwatch" in by:
        (db0, ar0), (db1, ar1) = result["storage"]
        s0, s1, mb = db0 + ar0, db1 + ar1, 2**20
        per_day = (s1 - s0) / result["window_s"] * 86400
        print(f"txnwatch storage: SQLite {db0 / mb:.1f} -> {db1 / mb:.1f} MB, archive {ar0 / mb:.1f} -> {ar1 / mb:.1f} MB "
              f"over the window: +{(s1 - s0) / mb:.1f} MB in {result['window_s']:.0f} s = {per_day / mb:,.0f} MB/day "
              f"extrapolated (lag rows every lag_sample_interval_seconds; retention and archiving rounds are not in a "
              f"window this short)")
    print("=" * 110)


def omitted(text: str) -> dict[str, float]:
    """txnwatch_cardinality_omitted by kind and reason (what its caps left out of the lag series)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("txnwatch_cardinality_omitted{") and (match := _SAMPLE.match(line)):
            labels = dict(_LABEL.findall(match.group(2)))
            out[f"{labels.get('kind')}/{labels.get('reason')}"] = float(match.group(3))
    return out


def lag_report(by: dict[str, Target], built: dict[str, Any]) -> None:
    if "txnwatch" not in by:
        return
    if by["txnwatch"].bodies:
        left_out = {k: v for k, v in omitted(by["txnwatch"].bodies[max(by["txnwatch"].bodies)]).items() if v}
        print(f"txnwatch_cardinality_omitted (its defaults' caps): {left_out or 'nothing left out'}")
    live = set(built.get("live_topics", ()))
    ours = by["txnwatch"]
    for peer in ("kafka_exporter", "kminion"):
        if peer not in by:
            continue
        rounds = sorted(ours.bodies.keys() & by[peer].bodies.keys())  # ticks both answered
        if not rounds:
            print(f"lag agreement with {peer}: no tick where both answered")
            continue
        for round_no in rounds[-2:]:
            mine = lag_series(ours.bodies[round_no], *FAMILIES["txnwatch"])
            theirs = lag_series(by[peer].bodies[round_no], *FAMILIES[peer])
            a = agreement(mine, theirs, live)
            still_bad = a["differ_still"] + a["missing_ours_still"] + a["missing_theirs_still"]
            verdict = ("every series equal" if a["equal"] == a["ours"] == a["theirs"] else
                       "every series equal but on the live workload partitions" if not still_bad else "DISAGREE")
            print(f"lag agreement with {peer} (round {round_no}; txnwatch {a['ours']:,} series, {peer} "
                  f"{a['theirs']:,}) -> {verdict}")
            print(f"    outside the live partitions: equal {a['equal_still']:,}, different {a['differ_still']}, "
                  f"missing in txnwatch {a['missing_ours_still']}, missing in {peer} {a['missing_theirs_still']}")
            print(f"    on the workload's live partitions: equal {a['equal_live']}, different {a['differ_live']}, "
                  f"missing in txnwatch {a['missing_ours_live']}, missing in {peer} {a['missing_theirs_live']}")
            for key, mine_v, theirs_v in a["examples"]:
                print(f"    e.g. {key}: txnwatch {mine_v:g}, {peer} {theirs_v:g}")


def txnwatch_ports(free_ports: Any) -> tuple[int, int, int]:
    """The API's port with the next one free too (txnwatch's metrics port defaults to api.port + 1), and two
    more for the peers, none of them that next one."""
    import socket

    for _ in range(50):
        api, exporter, kminion = free_ports(3)
        if api + 1 in (exporter, kminion):
            continue
        with socket.socket() as probe_socket:
            try:
                probe_socket.bind(("127.0.0.1", api + 1))
            except OSError:
                continue
        return api, exporter, kminion
    raise RuntimeError("no free pair of ports for txnwatch's API and metrics port")


def metrics_url(api_port: int) -> str:
    """Where a user's Prometheus scrapes txnwatch by default: its metrics port when it serves, else the API."""
    url = f"http://127.0.0.1:{api_port + 1}/metrics"
    try:
        if httpx.get(url, timeout=30).status_code == 200:
            return url
    except httpx.HTTPError:
        pass
    return f"http://127.0.0.1:{api_port}/metrics"


def start_workload(bootstrap: str, work: Path) -> subprocess.Popen[bytes]:
    txnwatch = Path(sys.executable).with_name("txnwatch")
    log = open(work / "workload.log", "w")  # noqa: SIM115 - held by the child for its life
    return subprocess.Popen([str(txnwatch), "lab", "workload", "--scenario", "steady", "--bootstrap-server", bootstrap,
                             "--report-every", "60"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


# What an interpreter holds once it has imported, and nothing else: the floor under txnwatch's RSS.
FLOORS = {
    "the libraries alone (kafka, sqlalchemy.orm, fastapi)": "import kafka, sqlalchemy.orm, fastapi",
    "`txnwatch run`'s start-up imports, no data": (
        "import txnwatch.cli.main, txnwatch.cli.daemon\n"  # the entry point's fast path for a plain `txnwatch run`
        "import txnwatch.serve.server, txnwatch.runtime.wiring, txnwatch.serve.front, txnwatch.serve.metrics_process"),
    "the start-up imports and what a polling daemon loads once it runs (its Kafka clients, polls, log tail)": (
        "import txnwatch.cli.main, txnwatch.cli.daemon\n"
        "import txnwatch.serve.server, txnwatch.runtime.wiring, txnwatch.serve.front, txnwatch.serve.metrics_process\n"
        "import kafka.admin, txnwatch.kafka.poll, txnwatch.kafka.txnlog, txnwatch.collect.poll_loop\n"
        "import txnwatch.collect.txnlog_tail, uvicorn.server, sqlite3"),
    "the start-up imports and the API stack (loaded on the first request other than a probe)": (
        "import txnwatch.cli.main, txnwatch.cli.daemon\n"
        "import txnwatch.serve.server, txnwatch.runtime.wiring, txnwatch.serve.front, txnwatch.serve.metrics_process\n"
        "import txnwatch.serve.app"),
}


def import_floors() -> dict[str, tuple[float, float]]:
    """(RSS, PSS) MB of a fresh interpreter of this venv after each FLOORS import, read from its own smaps."""
    read = ("\nimport sys\nfor l in open('/proc/self/smaps_rollup'):\n    k = l.split(':')[0]\n"
            "    if k in ('Rss', 'Pss'): print(k, int(l.split()[1]), file=sys.stderr)")
    floors = {}
    for label, code in FLOORS.items():
        done = subprocess.run([sys.executable, "-c", code + read], capture_output=True, text=True, timeout=120)
        kb = dict(line.split() for line in done.stderr.splitlines() if line.startswith(("Rss ", "Pss ")))
        floors[label] = (int(kb.get("Rss", 0)) / 1024, int(kb.get("Pss", 0)) / 1024)
    return floors


def start_baseline(ref: str, bootstrap: str, work: Path, free_ports: Any) -> Target:
    """txnwatch as it was at ``ref``, on the same defaults, lab and venv: for before/after figures in one run."""
    root = Path(__file__).resolve().parents[1]
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    tree = work / f"baseline-{commit}"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(root), "archive", commit, "service", "alembic", "alembic.ini"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    port = txnwatch_ports(free_ports)[0]
    config = tree / "txnwatch.yaml"
    write_txnwatch_config(config, bootstrap, port)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    env["PYTHONPATH"] = str(tree / "service")  # ahead of the venv's editable install of this checkout
    return start(f"txnwatch@{commit}", [sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                 f"http://127.0.0.1:{port}/metrics", work, env=env)


def commit_of_checkout() -> str:
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (done.stdout.strip() or "?") + (" (modified)" if dirty else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=5.0, help="measured window")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the lab's partitions and groups")
    parser.add_argument("--skip-peers", action="store_true", help="txnwatch alone")
    parser.add_argument("--keep-lab", action="store_true", help="leave the lab up and the run's files in place")
    parser.add_argument("--scrape-every", type=float, default=15.0, help="seconds between scrape rounds")
    parser.add_argument("--probe-seconds", type=float, default=90.0,
                        help="after the window, scrape txnwatch alone this long (latency quiet and during polls)")
    parser.add_argument("--probe-every", type=float, default=0.25)
    parser.add_argument("--warmup-polls", type=int, default=3, help="txnwatch polls before the window")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--baseline", metavar="REF", help="also run the txnwatch of this git revision (its service/ "
                        "and alembic/, exported to the run's directory; this venv) beside this checkout's, same lab")
    args = parser.parse_args()
    started = time.monotonic()
    commit = commit_of_checkout()

    peers: dict[str, Path] = {}
    if not args.skip_peers:
        for peer in (KAFKA_EXPORTER, KMINION):
            if (binary := ensure_peer(peer)) is not None:
                peers[peer.name] = binary
    lab_args = argparse.Namespace(brokers=args.brokers, ids=0, open=0, hanging=0,
                                  partitions=max(50, int(2000 * args.scale)), topics=50,
                                  groups=max(3, int(300 * args.scale)), offsets_per_group=40, connections=8)
    lab, built = biglab.build_lab(lab_args, die_with_parent=not args.keep_lab)
    built["kafka_version"] = lab.kafka_version
    work = Path(tempfile.mkdtemp(prefix="txnwatch-peers-"))
    targets: list[Target] = []
    workload = None
    try:
        from txnwatch.lab.ports import free_ports

        bootstrap = built["bootstrap"]
        workload = start_workload(bootstrap, work)
        built["live_topics"] = [f"txnwatch-steady-{s}" for s in ("input", "output", "java")]
        port_t, port_e, port_m = txnwatch_ports(free_ports)
        config = work / "txnwatch.yaml"
        write_txnwatch_config(config, bootstrap, port_t)
        print(f"run directory {work}", flush=True)
        targets.append(start("txnwatch", [str(Path(sys.executable).with_name("txnwatch")), "run", "--config",
                                          str(config)], f"http://127.0.0.1:{port_t}/metrics", work))
        api_metrics = targets[0].url
        if args.baseline:
            targets.append(start_baseline(args.baseline, bootstrap, work, free_ports))
        if "kafka_exporter" in peers:
            targets.append(start("kafka_exporter", [str(peers["kafka_exporter"]),
                                                    *[f"--kafka.server={b}" for b in bootstrap.split(",")],
                                                    f"--kafka.version={KAFKA_EXPORTER_KAFKA_VERSION}",
                                                    f"--web.listen-address=127.0.0.1:{port_e}"],
                                 f"http://127.0.0.1:{port_e}/metrics", work))
        if "kminion" in peers:
            env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"), "KAFKA_BROKERS": bootstrap,
                   "EXPORTER_HOST": "127.0.0.1", "EXPORTER_PORT": str(port_m)}
            targets.append(start("kminion", [str(peers["kminion"])], f"http://127.0.0.1:{port_m}/metrics", work,
                                 env=env))
        print(f"waiting for the targets (txnwatch: {args.warmup_polls} polls, the tail catching up)", flush=True)
        wait_ready(targets, work / "txnwatch.db", args.warmup_polls, deadline_s=900)
        targets[0].url = metrics_url(port_t)
        for target in targets[1:]:
            if target.name.startswith("txnwatch@"):
                target.url = metrics_url(int(target.url.split(":")[2].split("/")[0]))
        targets[0].where = ("its metrics port (the port Helm scrapes)" if targets[0].url != api_metrics
                            else "its API port (no metrics port answered)")
        print(f"  txnwatch's /metrics scraped at {targets[0].url}"
              f"{' (its metrics port, api.port + 1 by default)' if targets[0].url != api_metrics else ''}", flush=True)
        print(f"measuring for {args.minutes:g} min", flush=True)
        result = measure(targets, args, work)
        if args.probe_seconds > 0:
            print(f"probing txnwatch's /metrics every {args.probe_every:g} s for {args.probe_seconds:g} s", flush=True)
            before = per_process_cpu_s(targets[0].proc.pid)
            probe(targets[0], args.probe_seconds, args.probe_every)
            targets[0].probe_split = cpu_split(before, per_process_cpu_s(targets[0].proc.pid))
        report(targets, result, built, args, work / "txnwatch.db", started, commit)
    finally:
        for target in targets:
            stop(target)
        if workload is not None and workload.poll() is None:
            workload.send_signal(signal.SIGINT)
            try:
                workload.wait(timeout=60)
            except subprocess.TimeoutExpired:
                workload.kill()
        if args.keep_lab:
            print(f"keeping the lab ({built['bootstrap']}, {built['lab_dir']}) and the run's files ({work})")
        else:
            print("tearing the lab down", flush=True)
            lab.down()
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
