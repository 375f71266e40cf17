"""Soak: txnwatch against a lab cluster under steady workload with periodic faults, bounded in time.

Runs the daemon as its own process (so its RSS is its own), a steady workload, and
every ``--fault-every`` seconds one fault from a rotation: a hanging transaction
(held, then aborted), a broker restart, a latency spike, a coordinator failover.
Prints RSS growth after warm-up, poll-time percentiles from /metrics, and per hanging
incident whether exactly one trigger and one resolve reached the local PagerDuty
endpoint (lost / duplicate pages).  Targets: RSS growth < 10 %, no lost or duplicate
alert.  Performance figures are printed, never asserted.

    python benchmarks/soak.py                 # 30 minutes
    python benchmarks/soak.py --minutes 5     # a short run
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.alerting.fake_pagerduty import fake_pagerduty
from tests.fixtures.daemon import free_port, terminate, wait_for
from txnwatch.lab import faults
from txnwatch.lab.cluster import start_lab
from txnwatch.lab.settings import PRE_KIP_890, LabSettings
from txnwatch.lab.topics import create_topic
from txnwatch.lab.workload import Workload


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def poll_seconds(base: str) -> float | None:
    try:
        for line in httpx.get(base + "/metrics", timeout=5).text.splitlines():
            if line.startswith("txnwatch_poll_duration_seconds{"):
                return float(line.rsplit(" ", 1)[1])
    except httpx.HTTPError:
        return None
    return None


def _status(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30)
    parser.add_argument("--fault-every", type=float, default=60, help="seconds between faults")
    parser.add_argument("--poll-interval", type=float, default=2)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="txnwatch-soak-"))
    # Hanging transactions are injected: the pre-KIP-890 setting (verification off) is what allows them.
    lab = start_lab(LabSettings(brokers=3, transactions=PRE_KIP_890), work / "lab", die_with_parent=True)
    proc = None
    try:
        with fake_pagerduty() as pd:
            port = free_port()
            config = {"database_url": f"sqlite:///{work / 'soak.db'}", "poll_interval_seconds": args.poll_interval,
                      "clusters": [{"name": "lab", "bootstrap_servers": lab.bootstrap_servers,
                                    "request_timeout_ms": 5000}],
                      "detection": {"lso_stall_seconds": 10},
                      "pagerduty": {"enabled": True, "routing_key": "soak", "events_url": pd.url},
                      "alert_rules": {"hanging_transaction": {"for_seconds": 0}},
                      "api": {"host": "127.0.0.1", "port": port}, "log_level": "WARNING"}
            (work / "config.yaml").write_text(yaml.safe_dump(config))
            proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(work / "config.yaml")],
                                    stdout=(work / "daemon.log").open("wb"), stderr=subprocess.STDOUT)
            base = f"http://127.0.0.1:{port}"
            wait_for(lambda: _status(base + "/readyz") == 200, 90, what="daemon ready")
            admin = lab.admin()
            create_topic(admin, "soak-faults", 3, 3)
            admin.close()
            workload = Workload(lab.bootstrap_servers, "steady", lab=lab, topic_prefix="soak", seed=3).start()

            started = time.monotonic()
            end = started + args.minutes * 60
            warm_rss: float | None = None
            rss: list[float] = []
            polls: list[float] = []
            hanging_keys: list[str] = []
            rotation = ["hanging", "restart", "latency", "failover"]
            next_fault, step = started + args.fault_every / 2, 0
            while time.monotonic() < end:
                rss.append(rss_mb(proc.pid))
                if warm_rss is None and time.monotonic() - started > min(120, args.minutes * 60 / 4):
                    warm_rss = rss[-1]
                value = poll_seconds(base)
                if value is not None:
                    polls.append(value)
                if time.monotonic() >= next_fault:
                    kind = rotation[step % len(rotation)]
                    step += 1
                    print(f"[{time.monotonic() - started:6.0f}s] fault: {kind}", flush=True)
                    if kind == "hanging":
                        fault = faults.inject_hanging_transaction(lab.bootstrap_servers, "soak-faults", step % 3)
                        hanging_keys.append(f"hanging_transaction/lab/soak-faults-{step % 3}/pid={fault.producer_id}")
                        hold = lab.transaction_max_timeout_ms / 1000 + 4 * args.poll_interval + 5
                        deadline = time.monotonic() + hold
                        while time.monotonic() < deadline:
                            rss.append(rss_mb(proc.pid))
                            time.sleep(2)
                        fault.clear()
                    elif kind == "restart":
                        lab.restart_broker(lab.brokers[-1].node_id)
                    elif kind == "latency":
                        with faults.add_latency(lab, None, 50):
                            time.sleep(10)
                    else:
                        with faults.fail_over_coordinator(lab, "soak-probe-id"):
                            time.sleep(10)
                    next_fault = time.monotonic() + args.fault_every
                if proc.poll() is not None:
                    raise SystemExit(f"the daemon exited with {proc.returncode}: see {work / 'daemon.log'}")
                time.sleep(5)
            workload.stop(timeout=15)
            time.sleep(4 * args.poll_interval)  # let the last resolves go out
            actions = pd.actions()

        lost = [k for k in hanging_keys if ("trigger", k) not in actions]
        unresolved = [k for k in hanging_keys if ("resolve", k) not in actions]
        duplicated = [k for k in hanging_keys if actions.count(("trigger", k)) > 1 or actions.count(("resolve", k)) > 1]
        final = rss[-1] if rss else 0.0
        growth = (final - warm_rss) / warm_rss * 100 if warm_rss else float("nan")
        q = statistics.quantiles(polls, n=100) if len(polls) >= 2 else [float("nan")] * 99
        print(f"\nsoak: {args.minutes:g} min, {step} faults, {len(hanging_keys)} hanging incidents")
        print(f"daemon RSS: warm {warm_rss or 0:.0f} MB, final {final:.0f} MB, max {max(rss or [0]):.0f} MB, "
              f"growth {growth:+.1f}% (target < 10%)")
        print(f"poll duration: p50 {q[49]:.3f}s  p95 {q[94]:.3f}s  p99 {q[98]:.3f}s  (n={len(polls)})")
        print(f"pages: lost {len(lost)}, unresolved {len(unresolved)}, duplicated {len(duplicated)} (target 0 each)")
    finally:
        terminate(proc)
        lab.down()
        if os.environ.get("TXNWATCH_SOAK_KEEP") is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
