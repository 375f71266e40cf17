"""What the transactional canary costs: the daemon with it beside the daemon without it, on the same lab.

Issue 39 asks for the canary's cost in CPU and in requests.  On a lab of ``--brokers`` brokers (started here, or
``--bootstrap``):

* CPU: ``txnwatch run`` watches the cluster with ``canary.enabled`` off and on, in turns (harness.alternate),
  ``--seconds`` each, ``--rounds`` times: CPU seconds per minute of the daemon's process tree (its metrics port's
  process included) and, with the canary on, of its threads alone (``canary-<cluster>`` and kafka-python's I/O
  threads of its three clients, ``kio-txnwatch-ca``, the 15 bytes Linux keeps of their names), by OS thread name;
* requests: the canary alone (its real client, txnwatch.kafka.canary, and its rounds, txnwatch.canary.probe) in
  this process for ``--seconds``, every Kafka request its clients send counted by API at kafka-python's
  connection (``KafkaConnection._send_request``, wrapped here only) and given per minute.

    .venv/bin/python benchmarks/canary.py [--brokers 3] [--seconds 60] [--rounds 2] [--interval 15]

Prints figures and ratios; asserts nothing (docs/performance.md quotes them).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness

CANARY_THREADS = ("canary-", "kio-txnwatch-ca")  # 15 bytes of kio-txnwatch-canary(-reader)


def canary_requests(bootstrap: str, args: argparse.Namespace) -> tuple[Counter[str], float, int]:
    """(requests by API, minutes, rounds) of the canary alone, its rounds every ``--interval`` for ``--seconds``."""
    from kafka.net.connection import KafkaConnection

    from txnwatch.canary.probe import ClusterCanary, ProbeSettings
    from txnwatch.core.config import ClusterConfig
    from txnwatch.kafka.canary import CanaryClient
    from txnwatch.kafka.settings import ClusterConnectionSettings

    counted: Counter[str] = Counter()
    lock = threading.Lock()
    original = KafkaConnection._send_request

    def counting(self: Any, request: Any, *a: Any, **kw: Any) -> Any:
        with lock:
            counted[type(request).__name__.removesuffix("Request").rstrip("_v0123456789")] += 1
        return original(self, request, *a, **kw)

    settings = ClusterConnectionSettings.from_config(ClusterConfig(name="bench", bootstrap_servers=bootstrap.split(",")))
    probe = ProbeSettings("_txnwatch_canary_bench", "txnwatch-canary-bench-requests", args.interval, 5_000, 2)
    canary = ClusterCanary("bench", probe, lambda: CanaryClient(
        settings, topic=probe.topic, transactional_id=probe.transactional_id, replication_factor=3,
        transaction_timeout_ms=10_000, timeout_ms=5_000))
    canary.run_round()  # start-up (the topic, InitProducerId) is not the steady cost
    KafkaConnection._send_request = counting  # the benchmark's own count, nothing else
    try:
        started, rounds = time.monotonic(), 0
        while time.monotonic() - started < args.seconds:
            began = time.monotonic()
            canary.run_round()
            rounds += 1
            time.sleep(max(0.0, args.interval - (time.monotonic() - began)))
        minutes = (time.monotonic() - started) / 60
    finally:
        KafkaConnection._send_request = original
        canary.close()
    return counted, minutes, rounds


def run_side(side: str, n: int, lab: harness.Lab, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    canary = {"enabled": side == "canary", "interval_seconds": args.interval,
              "transactional_id": "txnwatch-canary-bench"}
    daemon = harness.Daemon.start(work / f"{side}-{n}", [{"name": "bench", "bootstrap_servers": lab.bootstrap.split(","),
                                                            "canary": canary}], name=f"{side}-{n}",
                                  settings={"transaction_log": {"enabled": False}})
    try:
        daemon.wait(polls=2)
        time.sleep(args.interval + 5)  # past start-up: the topic made, the producer initialised
        threads0 = harness.tree_threads_cpu_s(daemon.pid)
        sampler = harness.Sampler(daemon.pid)
        sampler.start()
        time.sleep(args.seconds)
        sampler.stop()
        threads = harness.spent(threads0, harness.tree_threads_cpu_s(daemon.pid))
    finally:
        harness.terminate(daemon.proc)
    minutes = sampler.wall_s / 60
    canary_cpu = sum(cpu for name, cpu in threads if name.split("/")[-1].startswith(CANARY_THREADS))
    return {"cpu_per_min": sampler.cpu_per_minute, "canary_threads_per_min": canary_cpu / minutes,
            "loads": str(sampler.loads)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="an existing cluster instead of a lab started here")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--interval", type=float, default=15, help="canary.interval_seconds (default 15)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-canary-"))
    with harness.Lab(args.bootstrap, brokers=args.brokers) as lab:
        results = harness.alternate(["off", "canary"], args.rounds, lambda side, n: run_side(side, n, lab, args, work))
        requests, minutes, rounds = canary_requests(lab.bootstrap, args)
    print()
    print(harness.machine_line(" / ".join(r["loads"] for side in results.values() for r in side)))
    print(f"{args.brokers} broker(s), canary every {args.interval:g} s, {args.seconds:g} s x {args.rounds} per side")
    off = statistics.median(r["cpu_per_min"] for r in results["off"])
    on = statistics.median(r["cpu_per_min"] for r in results["canary"])
    threads = statistics.median(r["canary_threads_per_min"] for r in results["canary"])
    harness.rows(["", "off", "canary", "canary/off"], [
        ["daemon CPU-s per minute (median)", f"{off:.2f}", f"{on:.2f}", harness.ratio(on, off)],
        ["  the canary's threads", "-", f"{threads:.2f}", "-"],
    ])
    print()
    print(f"the canary alone: {rounds} rounds in {minutes:.1f} min")
    harness.rows(["Kafka requests per minute", "canary"],
                 [*([f"  {api}", f"{n / minutes:.1f}"] for api, n in requests.most_common()),
                  ["  all", f"{sum(requests.values()) / minutes:.1f}"]])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
