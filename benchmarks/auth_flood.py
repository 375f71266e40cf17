"""Token guessing against a real `txnwatch run` on loopback (issue 23 item 7): what a flood costs, side by side.

Starts `txnwatch run` (SQLite, a read token, the admin action on, one unreachable cluster, api.workers 0),
then sends, one phase after another on keep-alive connections:

1. ``valid``: requests with the right bearer token (the reference: what an authorized request costs);
2. ``guess``: wrong bearer tokens from one client: the first ``api.auth_failures_per_window`` answered
   401, the rest 429 without a token check;
3. ``rotate``: one wrong token from each of many clients (X-Forwarded-For from the trusted 127.0.0.1), the
   attacker who rotates addresses: every one a 401 and a new entry in the bounded client table;
4. ``admin``: wrong admin tokens from one client (401s audited, then 429s).

Per phase: the statuses, requests/s, the daemon's CPU seconds per 1,000 requests (from /proc) beside the
wall time, its RSS before and after, and the log lines it wrote; then the machine's load.  No asserts:
the figures and ratios are the result (docs/performance.md quotes them).

    .venv/bin/python benchmarks/auth_flood.py [--requests 3000] [--clients 20000]
"""

from __future__ import annotations

import argparse
import collections
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

READ, ADMIN = "bench-r34d-t0ken", "bench-4dmin-t0ken"
TICK_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK_S


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(workdir: Path, port: int) -> tuple[subprocess.Popen[bytes], Path]:
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{workdir / 'db.sqlite'}", "poll_interval_seconds": 5,
        "api": {"host": "127.0.0.1", "port": port, "read_token": READ, "admin_enabled": True, "admin_token": ADMIN},
        "clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1", "connect_timeout_ms": 200}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    subprocess.run([sys.executable, "-m", "txnwatch", "migrate", "--config", str(config)], check=True, env=env,
                   capture_output=True)
    log = workdir / "txnwatch.log"
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200:
                return proc, log
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"txnwatch run did not serve; its log:\n{log.read_text()[-2000:]}")


def phase(name: str, pid: int, log: Path, send: list[tuple[str, str, dict[str, str]]], base: str) -> None:
    lines_before = log.read_text().count("\n")
    rss_before, cpu_before, started = rss_mb(pid), cpu_s(pid), time.monotonic()
    statuses: collections.Counter[int] = collections.Counter()
    with httpx.Client(base_url=base, timeout=30) as http:
        for method, path, headers in send:
            answer = http.request(method, path, headers=headers,
                                  json={"cluster": "c", "topic": "t", "partition": 0, "producer_id": 1,
                                        "producer_epoch": 0} if method == "POST" else None)
            statuses[answer.status_code] += 1
    wall = time.monotonic() - started
    cpu = cpu_s(pid) - cpu_before
    lines = log.read_text().count("\n") - lines_before
    print(f"{name:<7} {len(send):>7} {dict(sorted(statuses.items()))!s:<22} {len(send) / wall:>8.0f} "
          f"{wall:>7.2f} {cpu:>7.2f} {1000 * cpu / len(send):>9.3f} {rss_before:>7.1f} {rss_mb(pid):>7.1f} "
          f"{lines:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3000, help="requests in the valid, guess and admin phases")
    parser.add_argument("--clients", type=int, default=20000, help="distinct client addresses in the rotate phase")
    args = parser.parse_args()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="txnwatch-authflood-") as tmp:
        proc, log = start(Path(tmp), port)
        try:
            print(f"txnwatch run pid {proc.pid}, RSS {rss_mb(proc.pid):.1f} MB at start; "
                  f"load before: {Path('/proc/loadavg').read_text().split()[:3]}")
            print(f"{'phase':<7} {'sent':>7} {'statuses':<22} {'req/s':>8} {'wall s':>7} {'cpu s':>7} "
                  f"{'cpu ms/req':>9} {'rss MB':>7} {'after':>7} {'lines':>6}")
            path = "/api/v1/alerts"
            phase("valid", proc.pid, log, [("GET", path, {"Authorization": f"Bearer {READ}",
                                                          "X-Forwarded-For": "198.51.100.1"})] * args.requests, base)
            phase("guess", proc.pid, log, [("GET", path, {"Authorization": f"Bearer guess-{i}",
                                                          "X-Forwarded-For": "198.51.100.2"})
                                           for i in range(args.requests)], base)
            phase("rotate", proc.pid, log, [("GET", path, {
                "Authorization": "Bearer guess", "X-Forwarded-For": f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"})
                for i in range(args.clients)], base)
            phase("admin", proc.pid, log, [("POST", "/api/v1/admin/abort", {"Authorization": f"Bearer guess-{i}",
                                                                            "X-Forwarded-For": "198.51.100.3"})
                                           for i in range(args.requests)], base)
            time.sleep(6)  # /metrics is rendered once per poll interval (5 s here): let it count the last phase
            metrics = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {READ}",
                                                            "X-Forwarded-For": "198.51.100.9"}, timeout=10).text
            print("".join(line + "\n" for line in metrics.splitlines()
                          if line.startswith("txnwatch_auth_failures_total")), end="")
            print(f"log: {log.stat().st_size} bytes in all; load after: "
                  f"{Path('/proc/loadavg').read_text().split()[:3]} on {os.cpu_count()} CPUs")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
