"""What the daemon's lazily built API costs, and when (issue 25, idle RSS; serve/front.py).

`txnwatch run` answers `/healthz` and `/readyz` from its front and builds the API stack (FastAPI, the routers'
models, the console) on the first other request.  This starts `txnwatch run` from this checkout's venv
(SQLite in a temporary directory, one cluster at an address nothing listens on: it polls and fails, and
serves), waits for `/healthz`, lets it idle, and prints the daemon's RSS and PSS (its own process; the
metrics port's process apart) before and after the first API request, the first request's wall time and
the daemon's CPU-seconds over it, beside the next requests' and the probes'.  The machine's load average is
printed: wall times under load are not the quiet figures, CPU-seconds are closer.

    .venv/bin/python benchmarks/first_request.py [--idle-seconds 20] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
API_URL = "/api/v1/clusters"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memory_mb(pid: int) -> tuple[float, float]:
    """(RSS, PSS) MB of one process, from its smaps_rollup."""
    kb = {line.split(":")[0]: int(line.split()[1]) for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
          if line.startswith(("Rss:", "Pss:"))}
    return kb["Rss"] / 1024, kb["Pss"] / 1024


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(client: httpx.Client, url: str) -> tuple[float, int]:
    started = time.perf_counter()
    status = client.get(url).status_code
    return (time.perf_counter() - started) * 1000, status


def one_run(idle_s: float) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="txnwatch-first-request-"))
    port = free_port()
    config = work / "txnwatch.yaml"
    config.write_text(yaml.safe_dump({"database_url": f"sqlite:///{work / 'txnwatch.db'}",
                                      "retention": {"archive_dir": str(work / "archive")},
                                      "api": {"host": "127.0.0.1", "port": port},
                                      "clusters": [{"name": "nowhere", "bootstrap_servers": ["127.0.0.1:9"]}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    with open(work / "txnwatch.log", "w") as log:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "txnwatch"), "run", "--config", str(config)],
                                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=30) as client:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit(f"txnwatch did not come up: see {work / 'txnwatch.log'}")
                time.sleep(0.2)
            time.sleep(idle_s)
            rss0, pss0 = memory_mb(proc.pid)
            probes = [timed(client, "/readyz")[0] for _ in range(5)]
            cpu0 = cpu_s(proc.pid)
            first, status = timed(client, API_URL)
            cpu1 = cpu_s(proc.pid)
            if status != 200:
                raise SystemExit(f"{API_URL} answered {status}")
            later = [timed(client, API_URL)[0] for _ in range(20)]
            probes_after = [timed(client, "/readyz")[0] for _ in range(5)]
            time.sleep(2)
            rss1, pss1 = memory_mb(proc.pid)
        return {"rss0": rss0, "pss0": pss0, "rss1": rss1, "pss1": pss1, "first_ms": first, "first_cpu_s": cpu1 - cpu0,
                "later_ms": statistics.median(later), "probe_ms": statistics.median(probes),
                "probe_after_ms": statistics.median(probes_after)}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle-seconds", type=float, default=20.0, help="idle time before the first API request")
    parser.add_argument("--repeat", type=int, default=3, help="daemons started, one after another")
    args = parser.parse_args()
    load0 = os.getloadavg()[0]
    runs = [one_run(args.idle_seconds) for _ in range(args.repeat)]
    load1 = os.getloadavg()[0]
    print(f"txnwatch run (SQLite, one unreachable cluster), {args.repeat} daemons, load average (1 min) "
          f"{load0:.1f} at the start, {load1:.1f} at the end")
    for i, r in enumerate(runs, 1):
        print(f"  run {i}: daemon RSS/PSS {r['rss0']:.1f}/{r['pss0']:.1f} MB before the first API request -> "
              f"{r['rss1']:.1f}/{r['pss1']:.1f} MB after (+{r['rss1'] - r['rss0']:.1f}/+{r['pss1'] - r['pss0']:.1f}); "
              f"first GET {API_URL} {r['first_ms']:.0f} ms wall, {r['first_cpu_s']:.2f} CPU-s of the daemon; "
              f"the next ones {r['later_ms']:.1f} ms (median); /readyz {r['probe_ms']:.1f} ms before, "
              f"{r['probe_after_ms']:.1f} ms after")


if __name__ == "__main__":
    main()
