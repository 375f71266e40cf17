"""What every benchmark here shares: whose txnwatch runs, labs, stores, the daemon as a process, /proc, A/B, printing.

The benchmarks print figures and ratios and assert nothing; docs/performance.md quotes them with the command, the
commit and the machine.  A benchmark is the question it asks; the rest is here:

* **whose txnwatch**: this checkout's (the virtualenv's editable install), or a git revision's:
  :func:`baseline_tree` exports its ``service/``, ``alembic/`` and ``alembic.ini`` (``git archive``) and
  :func:`baseline_env` puts that tree ahead of this one for a child process, with this virtualenv;
* **processes**: :class:`Daemon` (``txnwatch run`` on a minimal config, waited for as a kubelet waits, its polls
  read back from its own ``polls`` table), :func:`child` (a benchmark's own child mode in a fresh interpreter,
  optionally pinned with ``taskset``, answering one JSON line), :func:`burners` (other work on the machine);
* **/proc**: CPU seconds of a process tree, of each process and of each thread by its OS name
  (core/threadnames.py names the daemon's), RSS and PSS summed over a tree, the machine's busy CPU, the run
  queue; :class:`Sampler` (a tree's RSS every second, PSS every fifth, the peak) and :class:`Meter` (CPU of some
  processes and of the machine over a window);
* **labs and stores**: :class:`Lab` (a ``txnwatch lab`` cluster for the run, or a running one given by
  ``--bootstrap``), :func:`scratch_store` (a migrated SQLite file with one cluster registered);
* **A/B**: :func:`alternate` runs the sides in turns, the order flipped every round, so load from elsewhere on a
  shared machine drifts into both alike;
* **printing**: :func:`pct`, :class:`Loads`, :func:`machine_line`, :func:`ratio`, :func:`rows`;
* **service internals that move between rooms** (the poll window, the serving processes, the registry, the
  modules of the import floor) are imported here and only here, so a move changes this file, not the benchmarks.

txnwatch itself is imported inside functions only: a child measures whichever txnwatch its ``sys.path`` puts first.

A new benchmark is a few lines of these.  Peak RSS of an idle daemon under an attack::

    daemon = Daemon.start(work, [{"name": "c", "bootstrap_servers": ["127.0.0.1:9"]}]); daemon.wait()
    sampler = Sampler(daemon.pid); sampler.start(); attack(daemon.url()); sampler.stop()
    print(sampler.peak(), sampler.cpu_per_minute)

one daemon watching one lab N times: ``Daemon.start(work, [{"name": f"c{i}", "bootstrap_servers": [...]} for i in
range(n)])``; N labs: N ``Lab()`` contexts; a peer process beside it: its ``Sampler`` beside the daemon's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")
T = TypeVar("T")


# -- whose txnwatch ----------------------------------------------------------------------------------------


def commit_of_checkout() -> str:
    """This checkout's short commit, '(modified)' when tracked files differ from it."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (head.stdout.strip() or "?") + (" (modified)" if dirty else "")


def baseline_tree(ref: str, into: Path) -> tuple[str, Path]:
    """(short commit, tree) of ``ref``'s service/, alembic/ and alembic.ini under ``into``; the checkout is untouched."""
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", ref], capture_output=True, text=True,
                            check=True).stdout.strip()
    tree = into / f"baseline-{commit}"
    tree.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit, "service", "alembic", "alembic.ini"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return commit, tree


def baseline_env(tree: Path | None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child that runs ``tree``'s txnwatch (None: this checkout's) from this virtualenv."""
    out = dict(os.environ if env is None else env)
    if tree is not None:
        out["PYTHONPATH"] = os.pathsep.join([str(tree / "service"), str(ROOT)])  # ahead of the editable install
        out["TXNWATCH_ALEMBIC_DIR"] = str(tree)
    return out


# -- processes -----------------------------------------------------------------------------------------------


def free_port(pair: bool = False) -> int:
    """A free port on 127.0.0.1; ``pair``: the next one free too (the metrics port defaults to api.port + 1)."""
    import socket

    while True:
        with socket.socket() as first:
            first.bind(("127.0.0.1", 0))
            port = int(first.getsockname()[1])
            if not pair:
                return port
            with socket.socket() as second:
                try:
                    second.bind(("127.0.0.1", port + 1))
                except OSError:
                    continue
                return port


def child(script: str | Path, *args: object, pin: str | None = None, env: Mapping[str, str] | None = None,
          timeout: float | None = None) -> dict[str, Any]:
    """Run ``python script args`` (pinned to CPUs ``pin`` with taskset) and return the JSON of its last line."""
    command = [sys.executable, str(script), *map(str, args)]
    if pin is not None:
        command = ["taskset", "-c", pin, *command]
    done = subprocess.run(command, capture_output=True, text=True, env=dict(env) if env is not None else None,
                          timeout=timeout)
    if done.returncode or not done.stdout.strip():
        raise RuntimeError(f"{' '.join(command[:4])} ... exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def reply(result: Mapping[str, Any]) -> None:
    """A child's answer to :func:`child`: one JSON line."""
    print(json.dumps(result), flush=True)


def terminate(proc: subprocess.Popen[Any] | None, timeout: float = 60) -> None:
    if proc is not None and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def burners(n: int) -> list[subprocess.Popen[bytes]]:
    """``n`` processes spinning one CPU each: other work on the machine.

    Each in a session of its own, as another program runs: with the kernel's autogroup scheduling (on by default)
    CPU is shared between sessions first, so a burner in the benchmark's session would take its CPU from the
    measured daemon's share instead of from the machine's."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True) for _ in range(n)]


def _merged(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = _merged(out[key], value) if isinstance(value, Mapping) and isinstance(out.get(key), dict) else value
    return out


@dataclass
class Daemon:
    """``txnwatch run`` as its own process (its CPU and memory its own), on a minimal config in ``work``."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int
    work: Path
    database_url: str

    @classmethod
    def start(cls, work: Path, clusters: Sequence[Mapping[str, Any]], *, name: str = "txnwatch",
              tree: Path | None = None, settings: Mapping[str, Any] | None = None, migrate: bool = False,
              importtime: bool = False, python: str | None = None, env: Mapping[str, str] | None = None,
              preexec_fn: Callable[[], None] | None = None) -> Daemon:
        """Only what points it at its clusters and keeps its files in ``work`` is set; ``settings`` (as in the YAML)
        are merged over that.  ``tree``: a :func:`baseline_tree`'s txnwatch instead of this checkout's; ``migrate``:
        ``txnwatch migrate`` first (PostgreSQL; SQLite is migrated by ``run``); ``python``: another virtualenv's;
        ``env``: more environment (none of the caller's ``TXNWATCH_*`` is passed on)."""
        work.mkdir(parents=True, exist_ok=True)
        port = free_port(pair=True)
        config = _merged({"database_url": f"sqlite:///{work / f'{name}.db'}", "clusters": list(clusters),
                          "api": {"host": "127.0.0.1", "port": port},
                          "retention": {"archive_dir": str(work / f"{name}-archive")}}, settings or {})
        path = work / f"{name}.json"  # YAML is a superset of JSON
        path.write_text(json.dumps(config))
        env = baseline_env(tree, {**{k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")},
                                  **(env or {})})
        interpreter = python or sys.executable
        if migrate:
            subprocess.run([interpreter, "-m", "txnwatch", "migrate", "--config", str(path)], env=env, check=True,
                           capture_output=True)
        command = [interpreter, *(["-X", "importtime"] if importtime else []), "-m", "txnwatch", "run", "--config",
                   str(path)]
        with open(work / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work,
                                    start_new_session=True, preexec_fn=preexec_fn)
        print(f"  started {name} (pid {proc.pid}) on port {port}", flush=True)
        return cls(name, proc, port, work, config["database_url"])

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def log(self) -> Path:
        return self.work / f"{self.name}.log"

    def url(self, path: str = "", port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.port}{path}"

    def answers(self, path: str = "/healthz", port: int | None = None) -> bool:
        import httpx

        try:
            return httpx.get(self.url(path, port), timeout=30).status_code == 200
        except httpx.HTTPError:
            return False

    def metrics_url(self) -> str:
        """Where Prometheus scrapes it on defaults: its metrics port (api.port + 1) when that serves, else the API."""
        return self.url("/metrics", self.port + 1) if self.answers("/metrics", self.port + 1) else self.url("/metrics")

    def wait(self, polls: int = 0, deadline_s: float = 600) -> None:
        """Until it answers /healthz on its API port (what a kubelet asks: /metrics there would build the API stack,
        serve/front.py) and has recorded ``polls`` polls."""
        deadline = time.monotonic() + deadline_s
        while not (self.answers() and len(self.polls()) >= polls):
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited {self.proc.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: not ready with {polls} polls after {deadline_s:.0f} s; see {self.log}")
            time.sleep(1)

    def polls(self) -> list[tuple[float, float, bool]]:
        """(start, end, ok) in epoch seconds of every poll it recorded (its own ``polls`` table)."""
        try:
            if self.database_url.startswith("sqlite:///"):
                path = self.database_url.removeprefix("sqlite:///")
                with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as conn:
                    rows = conn.execute("SELECT started_at, duration_ms, ok FROM polls ORDER BY id").fetchall()
            else:
                from sqlalchemy import create_engine, text

                engine = create_engine(self.database_url)
                with engine.connect() as connection:
                    rows = list(connection.execute(text("SELECT started_at, duration_ms, ok FROM polls ORDER BY id")))
                engine.dispose()
        except Exception:  # not created yet
            return []
        out = []
        for started, ms, ok in rows:
            at = started if isinstance(started, datetime) else datetime.fromisoformat(str(started))
            t0 = (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()  # naive times in the store are UTC
            out.append((t0, t0 + (ms or 0) / 1000, bool(ok)))
        return out

    def stop(self) -> None:
        terminate(self.proc)


def in_a_poll(at: float, took: float, polls: Sequence[tuple[float, float, bool]]) -> bool:
    """Whether [at, at + took] overlaps one of ``polls`` (:meth:`Daemon.polls`)."""
    return any(start <= at + took and at <= end for start, end, _ in polls)


# -- /proc ---------------------------------------------------------------------------------------------------


def _stat(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (field 3 on), or None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def tree(root: int) -> list[int]:
    """The process and its live descendants (a daemon's metrics port process, API workers and archive jobs)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := _stat(entry)):
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(parents.get(pid, []))
    return found


def cpu_s(pid: int | str, reaped: bool = False) -> float:
    """utime + stime of a process; ``reaped``: and of its children that have exited (cutime + cstime)."""
    fields = _stat(pid)
    return sum(int(x) for x in fields[11:15 if reaped else 13]) / TICK if fields else 0.0


def tree_cpu_s(root: int) -> float:
    """CPU seconds of the live tree plus what its reaped children used."""
    return sum(cpu_s(pid, reaped=True) for pid in tree(root))


def label(pid: int) -> str:
    """What a process runs, in a few words: the txnwatch module or command it runs, else its first words."""
    try:
        words = [w.decode(errors="replace") for w in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if w]
    except OSError:
        return str(pid)
    names = [w.rsplit("/", 1)[-1] for w in words]
    return next((n for n in names if "txnwatch" in n and n != "python"), " ".join(names[:3]))[:40]


def processes_cpu_s(root: int) -> dict[int, tuple[str, float]]:
    """{pid: (label, CPU seconds with its reaped children)} over the tree: which process pays."""
    return {pid: (label(pid), cpu_s(pid, reaped=True)) for pid in tree(root)}


def threads_cpu_s(pid: int | str = "self") -> dict[str, float]:
    """CPU seconds per thread of one process by OS thread name (threads of one name, a pool's, summed)."""
    out: dict[str, float] = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            raw = (task / "stat").read_text()
        except OSError:
            continue  # a thread that ended meanwhile
        name, fields = raw[raw.index("(") + 1:raw.rindex(")")], raw[raw.rindex(")") + 2:].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / TICK
    return out


def tree_threads_cpu_s(root: int) -> dict[str, float]:
    """CPU seconds per thread name over a tree, as 'process label/thread' when the tree has more than one process."""
    pids = tree(root)
    out: dict[str, float] = {}
    for pid in pids:
        try:
            threads = threads_cpu_s(pid)
        except OSError:
            continue
        for name, spent in threads.items():
            key = f"{label(pid).split()[0]}/{name}" if len(pids) > 1 else name
            out[key] = out.get(key, 0.0) + spent
    return out


def spent(before: Mapping[str, float], after: Mapping[str, float]) -> list[tuple[str, float]]:
    """What each key spent between two readings, biggest first (a key new in ``after`` counts from 0)."""
    return sorted(((k, v - before.get(k, 0.0)) for k, v in after.items()), key=lambda kv: -kv[1])


def _kb(pid: int | str, name: str, keys: tuple[str, ...]) -> dict[str, int]:
    out: dict[str, int] = {}
    try:
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in keys and rest.strip().endswith("kB"):
                out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


def memory_mb(pid: int | str) -> dict[str, float]:
    """VmRSS, VmHWM (the peak), RssAnon, RssFile (status) and Pss (smaps_rollup) of one process, in MB."""
    kb = _kb(pid, "status", ("VmRSS", "VmHWM", "RssAnon", "RssFile")) | _kb(pid, "smaps_rollup", ("Pss",))
    return {k: v / 1024 for k, v in kb.items()}


def tree_rss_mb(root: int) -> float:
    return sum(_kb(pid, "status", ("VmRSS",)).get("VmRSS", 0) for pid in tree(root)) / 1024


def tree_pss_mb(root: int) -> float:
    """PSS summed over a tree: pages the tree's processes share count once in all, as the pod's cgroup charges
    them; an RSS sum counts them once per process.  Reading smaps_rollup walks page tables: not every second."""
    return sum(_kb(pid, "smaps_rollup", ("Pss",)).get("Pss", 0) for pid in tree(root)) / 1024


def machine_busy_s() -> float:
    """CPU seconds everything on the machine has spent busy (all CPUs: user, nice, system, irq, softirq, steal)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:3]) + sum(fields[5:8])) / TICK


def run_queue_s() -> float:
    """Seconds this process's threads waited runnable for a CPU (schedstat): on a loaded machine, the scheduler's
    share of a latency rather than the code's."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total / 1e9


class Sampler(threading.Thread):
    """A process tree's RSS every ``every`` seconds (PSS every fifth sample), its CPU over the whole time, and the
    load average every 15 s, until :meth:`stop`: steady (median) and peak memory of a tree under some load."""

    def __init__(self, root: int, every: float = 1.0, pss_every: int = 5) -> None:
        super().__init__(daemon=True)
        self.root, self.every, self.pss_every = root, every, pss_every
        self.rss: list[float] = []
        self.pss: list[float] = []
        self.loads = Loads()
        self._halt = threading.Event()
        self.cpu0, self.t0 = tree_cpu_s(root), time.monotonic()
        self.cpu_s = self.wall_s = 0.0

    def run(self) -> None:
        next_load = 0.0
        while not self._halt.is_set():
            self.rss.append(tree_rss_mb(self.root))
            if (len(self.rss) - 1) % self.pss_every == 0:
                self.pss.append(tree_pss_mb(self.root))
            if time.monotonic() >= next_load:
                self.loads.sample()
                next_load = time.monotonic() + 15
            self._halt.wait(self.every)

    def stop(self) -> Sampler:
        self.cpu_s, self.wall_s = tree_cpu_s(self.root) - self.cpu0, time.monotonic() - self.t0
        self._halt.set()
        self.join(timeout=30)
        self.loads.sample()
        return self

    @property
    def cpu_per_minute(self) -> float:
        return self.cpu_s / max(self.wall_s, 1e-9) * 60

    def steady(self, of: Sequence[float] | None = None) -> float:
        values = self.rss if of is None else of
        return statistics.median(values) if values else float("nan")

    def peak(self, of: Sequence[float] | None = None) -> float:
        values = self.rss if of is None else of
        return max(values) if values else float("nan")


@dataclass
class Window:
    """CPU of some process trees (PostgreSQL's postmaster and backends, a daemon and its children) and of the whole
    machine over one stretch of wall time."""

    wall_s: float
    cpu_s: dict[int, float]
    machine_s: float
    load: tuple[float, float]

    def other_cpus(self) -> float:
        """CPUs' worth of work the machine did besides the measured processes."""
        return max(0.0, self.machine_s - sum(self.cpu_s.values())) / max(self.wall_s, 1e-9)


class Meter:
    """``with Meter(pids) as window:`` ... then ``window.result``: a :class:`Window` over the block."""

    def __init__(self, *pids: int) -> None:
        self.pids = pids
        self.result: Window | None = None

    def _cpu(self) -> dict[int, float]:
        return {pid: tree_cpu_s(pid) for pid in self.pids}

    def __enter__(self) -> Meter:
        self._t, self._cpu0, self._busy, self._load = time.perf_counter(), self._cpu(), machine_busy_s(), os.getloadavg()[0]
        return self

    def __exit__(self, *exc: object) -> None:
        cpu = self._cpu()
        self.result = Window(time.perf_counter() - self._t, {p: cpu[p] - self._cpu0[p] for p in self.pids},
                             machine_busy_s() - self._busy, (self._load, os.getloadavg()[0]))


# -- labs and stores -------------------------------------------------------------------------------------------


class Lab:
    """A lab cluster for one run: started here and torn down after (unless ``keep``), or one already running
    (``bootstrap``: a benchmark's ``--bootstrap``, ``txnwatch lab up``), which is left as it is.  ``settings`` are
    LabSettings' (one broker unless ``brokers``, kafka_version, ...); ``verification`` and ``txn_max_timeout_ms``
    its transactions'."""

    def __init__(self, bootstrap: str | None = None, *, keep: bool = False, proxy: bool = False,
                 verification: bool = True, txn_max_timeout_ms: int | None = None, **settings: Any) -> None:
        self.bootstrap, self.keep, self.dir = bootstrap or "", keep, ""
        self.cluster: Any = None  # a txnwatch.lab.cluster.LabCluster once started here
        self._settings = {"brokers": 1, **settings, "proxy": proxy}
        self._txn: dict[str, Any] = {"partition_verification_enable": verification}
        if txn_max_timeout_ms:
            self._txn["max_timeout_ms"] = txn_max_timeout_ms
        self.kafka_version = str(settings.get("kafka_version", "?"))

    def __enter__(self) -> Lab:
        if self.bootstrap:
            return self
        from txnwatch.lab.cluster import start_lab
        from txnwatch.lab.settings import LabSettings, TransactionSettings

        settings = LabSettings(**self._settings, transactions=TransactionSettings(**self._txn))
        self.dir = tempfile.mkdtemp(prefix="txnwatch-bench-lab-")
        started = time.monotonic()
        print(f"starting a {settings.brokers}-broker lab (Kafka {settings.kafka_version}) in {self.dir}", flush=True)
        self.cluster = start_lab(settings, self.dir, die_with_parent=not self.keep, quiet=True)
        self.bootstrap, self.kafka_version = self.cluster.bootstrap_servers, self.cluster.kafka_version
        print(f"  lab up in {time.monotonic() - started:.0f} s: {self.bootstrap}", flush=True)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.cluster is None:
            return
        if self.keep:
            print(f"keeping the lab: {self.bootstrap} (txnwatch lab down --dir {self.dir})")
            return
        self.cluster.down()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def proxy_port(self) -> int | None:
        proxy = getattr(self.cluster, "proxy", None)
        return None if proxy is None else int(proxy.control_port)


def scratch_store(prefix: str = "txnwatch-bench-store-", cluster: str = "bench",
                  bootstrap: str = "bench:9092") -> tuple[Any, Any, int]:
    """(engine, sessionmaker, the cluster's row id) of a migrated SQLite file, as the daemon has it at start; the
    file goes when the process exits."""
    import atexit

    from txnwatch.store.clusters import register_clusters
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.migrate import upgrade

    directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    url = f"sqlite:///{directory}/bench.db"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        cluster_id = register_clusters(session, {cluster: bootstrap}, datetime.now(UTC))[cluster]
    return engine, sessions, cluster_id


# -- A/B -----------------------------------------------------------------------------------------------------


def alternate(sides: Sequence[str], rounds: int, run: Callable[[str, int], T]) -> dict[str, list[T]]:
    """``run(side, round)`` for every side, ``rounds`` times, the order flipped every round (A B, B A, ...)."""
    out: dict[str, list[T]] = {side: [] for side in sides}
    for n in range(rounds):
        for side in (list(sides) if n % 2 == 0 else list(reversed(sides))):
            out[side].append(run(side, n))
    return out


# -- printing ------------------------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) by nearest rank; NaN of nothing."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))] if ordered else float("nan")


@dataclass
class Loads:
    """The machine's 1-minute load average, sampled: on a shared machine it belongs beside every figure."""

    seen: list[float] = field(default_factory=list)

    def sample(self) -> float:
        self.seen.append(os.getloadavg()[0])
        return self.seen[-1]

    def __str__(self) -> str:
        return f"{min(self.seen):.1f}-{max(self.seen):.1f}" if self.seen else "?"


def machine_line(loads: Loads | str) -> str:
    """One line for the top of a report: the machine, its load, Python and the checkout measured."""
    return (f"{os.cpu_count()} CPUs, load average (1 min) {loads}, CPython {sys.version.split()[0]}, "
            f"txnwatch {commit_of_checkout()}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def rows(header: Sequence[str], body: Sequence[Sequence[object]], first: int = 34, width: int = 16) -> None:
    """A table: the first column left-aligned ``first`` wide, the others right-aligned ``width`` wide."""
    for cells in (header, *body):
        print(f"{cells[0]!s:<{first}}" + "".join(f"{c!s:>{width}}" for c in cells[1:]))


# -- service internals that move between rooms ------------------------------------------------------------------


def poll_window() -> AbstractContextManager[None]:
    """What the collector wraps a poll in (the cyclic GC paused while any poll of the process runs)."""
    from txnwatch.core.pollwindow import PROCESS

    return PROCESS.poll()


def build_registry(state: Any, **kwargs: Any) -> Any:
    """The /metrics registry over a LatestState, as the daemon builds it."""
    from txnwatch.metrics.registry import build_registry as build

    return build(state, lambda: True, **kwargs)


def bind(host: str, port: int) -> Any:
    """A listening socket as the daemon binds its ports."""
    from txnwatch.supervise.binding import bind as bind_port

    return bind_port(host, port)


def metrics_port_process(settings: Any, directory: Any) -> Any:
    """The metrics port's standard-library process, serving the renders the collector writes to ``directory``."""
    from txnwatch.supervise.metrics_process import MetricsProcess

    listener = bind("127.0.0.1", 0)
    listener.listen(128)
    return MetricsProcess(settings, listener, directory)


def api_workers(settings: Any, port: int, directory: Any, workers: int) -> Any:
    """``workers`` API worker processes on ``port``, fed by what the collector publishes to ``directory``."""
    from txnwatch.supervise.workers import WorkerPool

    return WorkerPool(settings, bind("127.0.0.1", port), directory, workers)


_STARTUP = ("import txnwatch.cli.main, txnwatch.cli.daemon\n"  # the entry point's fast path for `txnwatch run`
            "import txnwatch.supervise.daemon, txnwatch.runtime.wiring, txnwatch.serve.front, txnwatch.supervise.metrics_process")
#: What an interpreter holds once it has imported these and nothing else: the floor under the daemon's RSS.
FLOORS = {
    "the libraries alone (kafka, sqlalchemy.orm, fastapi)": "import kafka, sqlalchemy.orm, fastapi",
    "`txnwatch run`'s start-up imports, no data": _STARTUP,
    "+ what a polling daemon loads once it runs (Kafka clients, polls, log tail)": (
        _STARTUP + "\nimport kafka.admin, txnwatch.kafka.poll, txnwatch.kafka.txnlog, txnwatch.collect.poll_loop\n"
        "import txnwatch.collect.txnlog_tail, uvicorn.server, sqlite3"),
    "+ the API stack (built on the first request other than a probe)": _STARTUP + "\nimport txnwatch.serve.app",
}


def import_floors() -> dict[str, tuple[float, float]]:
    """(RSS, PSS) MB of a fresh interpreter of this virtualenv after each of :data:`FLOORS`, from its own smaps."""
    read = ("\nimport sys\nfor l in open('/proc/self/smaps_rollup'):\n    k = l.split(':')[0]\n"
            "    if k in ('Rss', 'Pss'): print(k, int(l.split()[1]), file=sys.stderr)")
    floors = {}
    for what, code in FLOORS.items():
        try:  # minutes on a machine at load 30
            done = subprocess.run([sys.executable, "-c", code + read], capture_output=True, text=True, timeout=900)
        except subprocess.TimeoutExpired:
            floors[what] = (float("nan"), float("nan"))
            continue
        kb = dict(line.split() for line in done.stderr.splitlines() if line.startswith(("Rss ", "Pss ")))
        floors[what] = (int(kb.get("Rss", 0)) / 1024, int(kb.get("Pss", 0)) / 1024)
    return floors
