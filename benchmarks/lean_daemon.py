"""How lean is the daemon: the size of its own virtualenv and the idle memory of `txnwatch run`.

Goals (issues 16 and 18): the venv for the daemon alone under 250 MB; the idle resident memory of
`txnwatch run` watching one small cluster at most 100 MB.

1. Builds a throwaway virtualenv with `pip install txnwatch` (core dependencies only, at
   constraints.txt's versions), prints its size, then adds the `archive` extra (pyarrow, what the
   container image carries) and prints that too.
2. Runs `txnwatch run` from that venv (SQLite, one cluster: a one-broker lab cluster started here, or
   --bootstrap host:port), waits until /readyz says ready, lets it idle, and prints VmRSS, RssAnon
   and PSS next to the goal.
3. Prints which top-level packages the running daemon imported (from `python -X importtime`), so an
   import the daemon does not need shows up.

    .venv/bin/python benchmarks/lean_daemon.py [--bootstrap HOST:PORT] [--idle-seconds 30] [--keep DIR]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
GOAL_VENV_MB = 250
GOAL_RSS_MB = 100


def du_mb(path: Path) -> float:
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink()) / 2**20


def pip(venv: Path, *args: str) -> None:
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"),
                    *args], check=True)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_kb(pid: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in ("status", "smaps_rollup"):
        try:
            text = Path(f"/proc/{pid}/{name}").read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "Pss") and rest.strip().endswith("kB"):
                out[key] = int(rest.split()[0])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="watch this cluster instead of starting a one-broker lab")
    parser.add_argument("--idle-seconds", type=float, default=30)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the daemon venv here and keep it")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="txnwatch-lean-"))
    venv = args.keep or work / "venv"
    lab = None
    try:
        if not (venv / "bin" / "txnwatch").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            pip(venv, "--upgrade", "pip")
            pip(venv, str(ROOT))
        core_mb = du_mb(venv)
        tools_mb = sum(du_mb(p) for p in (venv / "lib").glob("python3*/site-packages/*")
                       if p.name.split("-")[0] in ("pip", "setuptools"))
        print(f"venv, daemon alone (pip install txnwatch): {core_mb:6.0f} MB "
              f"({core_mb - tools_mb:.0f} MB without pip/setuptools)   goal < {GOAL_VENV_MB} MB   "
              f"{'OK' if core_mb < GOAL_VENV_MB else 'MISSED'}")
        pip(venv, f"{ROOT}[archive]")
        print(f"venv, daemon + archive extra (pyarrow):   {du_mb(venv):6.0f} MB   (what the container image holds)")

        bootstrap = args.bootstrap
        if bootstrap is None:
            from txnwatch.lab.cluster import start_lab
            from txnwatch.lab.settings import LabSettings

            lab = start_lab(LabSettings(brokers=1), work / "lab", die_with_parent=True)
            bootstrap = lab.bootstrap_servers
        port = free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
        env.update(TXNWATCH_DATABASE_URL=f"sqlite:///{work / 'db.sqlite'}",
                   TXNWATCH_RETENTION__ARCHIVE_DIR=str(work / "archive"),
                   TXNWATCH_CLUSTERS=json.dumps([{"name": "small", "bootstrap_servers": bootstrap}]),
                   TXNWATCH_API__HOST="127.0.0.1", TXNWATCH_API__PORT=str(port), TXNWATCH_LOG_LEVEL="WARNING",
                   TXNWATCH_ALEMBIC_DIR=str(ROOT))  # the migrations live beside the package, as in the image
        imports = work / "importtime.log"
        with imports.open("wb") as err:
            daemon = subprocess.Popen([str(venv / "bin" / "python"), "-X", "importtime", "-m", "txnwatch", "run"],
                                      env=env, stdout=subprocess.DEVNULL, stderr=err, cwd=work)
        try:
            deadline = time.monotonic() + 180
            while True:
                if daemon.poll() is not None or time.monotonic() > deadline:
                    print(imports.read_text()[-3000:], file=sys.stderr)
                    raise SystemExit("txnwatch run did not become ready")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                time.sleep(1)
            time.sleep(args.idle_seconds)
            mem = memory_kb(daemon.pid)
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=60)
            except subprocess.TimeoutExpired:
                daemon.kill()
        rss_mb = mem.get("VmRSS", 0) / 1024
        print(f"idle RSS of txnwatch run, one cluster, {args.idle_seconds:.0f} s after ready: {rss_mb:6.1f} MB   "
              f"goal <= {GOAL_RSS_MB} MB   {'OK' if rss_mb <= GOAL_RSS_MB else 'MISSED'}")
        print(f"  RssAnon {mem.get('RssAnon', 0) / 1024:.1f} MB, RssFile {mem.get('RssFile', 0) / 1024:.1f} MB, "
              f"PSS {mem.get('Pss', 0) / 1024:.1f} MB")
        packages: collections.Counter[str] = collections.Counter()
        for line in imports.read_text(errors="replace").splitlines():
            if line.startswith("import time:") and "[us]" not in line:
                packages[line.rsplit("|", 1)[1].strip().split(".")[0]] += 1
        print(f"modules imported by the daemon: {sum(packages.values())}; by top-level package:")
        print("  " + ", ".join(f"{name} {count}" for name, count in packages.most_common(30)))
        unwanted = sorted(set(packages) & {"pyspark", "pyarrow", "py4j", "rich", "pygments", "pytest"})
        print(f"  not wanted in the daemon: {', '.join(unwanted) or 'none'}")
    finally:
        if lab is not None:
            lab.down()
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
