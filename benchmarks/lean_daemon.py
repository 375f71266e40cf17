"""How lean the daemon is: its own virtualenv's size, `txnwatch run`'s idle memory, and what its first API request
builds.

Goals (issues 16 and 18): the daemon's virtualenv under 250 MB; `txnwatch run` watching one small cluster idle at
100 MB resident at most.

1. A throwaway virtualenv with ``pip install txnwatch`` (core dependencies only, at constraints.txt's versions):
   its size with and without pip and setuptools; then with the ``archive`` extra (pyarrow: what the image holds).
2. `txnwatch run` from that virtualenv (SQLite, one cluster: a one-broker lab started here, or ``--bootstrap``),
   waited for until ``/readyz`` answers, left idle ``--idle-seconds``: VmRSS, RssAnon, RssFile and PSS of the daemon
   (its metrics port's process apart), and which top-level packages it imported (``python -X importtime``), so an
   import it does not need shows up.
3. The first API request (``GET /api/v1/clusters``): the daemon's RSS and PSS before and after it builds the API
   stack (serve/front.py answers the probes without it), the request's wall time and the daemon's CPU over it,
   beside the next requests' and the probes'.

    .venv/bin/python benchmarks/lean_daemon.py [--bootstrap HOST:PORT] [--idle-seconds 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks import harness

ROOT = harness.ROOT
GOAL_VENV_MB, GOAL_RSS_MB = 250, 100
UNWANTED = {"pyspark", "pyarrow", "py4j", "rich", "pygments", "pytest"}


def du_mb(path: Path) -> float:
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink()) / 2**20


def pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
                    *args], check=True)


def timed(client: httpx.Client, path: str) -> float:
    started = time.perf_counter()
    client.get(path).raise_for_status()
    return (time.perf_counter() - started) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="watch this cluster instead of starting a one-broker lab")
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the daemon's virtualenv here and keep it")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-lean-"))
    venv = args.keep or work / "venv"
    try:
        if not (venv / "bin" / "txnwatch").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip(venv, "--upgrade", "pip")
            pip(venv, str(ROOT))
        core_mb = du_mb(venv)
        tools_mb = sum(du_mb(p) for p in (venv / "lib").glob("python3*/site-packages/*")
                       if p.name.split("-")[0] in ("pip", "setuptools"))
        print(f"virtualenv, the daemon alone (pip install txnwatch): {core_mb:.0f} MB ({core_mb - tools_mb:.0f} MB "
              f"without pip and setuptools); goal < {GOAL_VENV_MB} MB: {'met' if core_mb < GOAL_VENV_MB else 'MISSED'}")
        pip(venv, f"{ROOT}[archive]")
        print(f"virtualenv with the archive extra (pyarrow, as the image holds): {du_mb(venv):.0f} MB")
        with harness.Lab(args.bootstrap) as lab:
            daemon = harness.Daemon.start(work, [{"name": "small", "bootstrap_servers": lab.bootstrap}],
                                          python=str(venv / "bin" / "python"), importtime=True,
                                          settings={"log_level": "WARNING"},
                                          env={"TXNWATCH_ALEMBIC_DIR": str(ROOT)})  # migrations beside the package
            try:
                deadline = time.monotonic() + 180
                while not daemon.answers("/readyz"):
                    if daemon.proc.poll() is not None or time.monotonic() > deadline:
                        raise SystemExit(f"txnwatch run did not become ready; see {daemon.log}")
                    time.sleep(1)
                time.sleep(args.idle_seconds)
                idle = harness.memory_mb(daemon.pid)
                with httpx.Client(base_url=daemon.url(), timeout=60) as client:
                    probes = [timed(client, "/readyz") for _ in range(5)]
                    cpu0 = harness.cpu_s(daemon.pid)
                    first = timed(client, "/api/v1/clusters")
                    first_cpu = harness.cpu_s(daemon.pid) - cpu0
                    later = [timed(client, "/api/v1/clusters") for _ in range(20)]
                    probes_after = [timed(client, "/readyz") for _ in range(5)]
                time.sleep(2)
                built = harness.memory_mb(daemon.pid)
            finally:
                daemon.stop()
        rss = idle.get("VmRSS", 0.0)
        print(f"idle `txnwatch run`, one cluster, {args.idle_seconds:.0f} s after ready: RSS {rss:.1f} MB (goal <= "
              f"{GOAL_RSS_MB} MB: {'met' if rss <= GOAL_RSS_MB else 'MISSED'}), RssAnon {idle.get('RssAnon', 0):.1f}, "
              f"RssFile {idle.get('RssFile', 0):.1f}, PSS {idle.get('Pss', 0):.1f} MB")
        print(f"the first API request: RSS {rss:.1f} -> {built.get('VmRSS', 0):.1f} MB, PSS {idle.get('Pss', 0):.1f} -> "
              f"{built.get('Pss', 0):.1f} MB; {first:.0f} ms wall, {first_cpu:.2f} CPU-s of the daemon; the next ones "
              f"{statistics.median(later):.1f} ms; /readyz {statistics.median(probes):.1f} ms before, "
              f"{statistics.median(probes_after):.1f} ms after")
        packages: collections.Counter[str] = collections.Counter()
        for line in daemon.log.read_text(errors="replace").splitlines():
            if line.startswith("import time:") and "[us]" not in line:
                packages[line.rsplit("|", 1)[1].strip().split(".")[0]] += 1
        print(f"modules the daemon imported: {sum(packages.values())}; by top-level package: "
              + ", ".join(f"{name} {count}" for name, count in packages.most_common(30)))
        print(f"  not wanted in the daemon: {', '.join(sorted(set(packages) & UNWANTED)) or 'none'}")
        loads = harness.Loads()
        loads.sample()
        print(harness.machine_line(loads))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
