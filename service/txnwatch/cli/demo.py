"""`txnwatch demo` (what `make run` starts): a lab cluster, the demo workload, and the daemon.

The point is the first five minutes of a newcomer: real Kafka, real transactions
(kafka-python and Kafka's own Java producer), a hanging transaction and an LSO
stall that txnwatch finds and alerts on, with nothing to configure.  The lab runs
the pre-KIP-890 broker setting (verification off), the only one under which a
hanging transaction can be produced; the banner says so.  Thresholds are shortened so the alerts fire within a couple
of minutes; everything runs on 127.0.0.1 and stops with Ctrl-C.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def demo_overrides(bootstrap: str, port: int, var_dir: Path,
                   broker_metrics_urls: dict[int, str] | None = None) -> dict[str, Any]:
    """Settings for the lab: short intervals and `for:` durations so the demo shows results quickly.

    `broker_metrics_urls` are the lab brokers' JMX exporter endpoints, so the demo shows the brokers' own
    KIP-890 verification figures beside txnwatch's, as a production setup with an exporter would."""
    from txnwatch.core import commands

    urls = {str(node): url for node, url in (broker_metrics_urls or {}).items()}
    return dict(
        database_url=f"sqlite:///{var_dir / 'demo.db'}",
        poll_interval_seconds=5,
        lag_sample_interval_seconds=0,  # every poll's lag rows: the console's cards name the blocked groups now
        # The transactional canary is off by default (it writes, and needs ACLs); the demo shows it.
        clusters=[dict(name="lab", bootstrap_servers=bootstrap, request_timeout_ms=5000, broker_metrics_urls=urls,
                       canary=dict(enabled=True, interval_seconds=5))],
        detection=dict(timeout_grace_seconds=10, prepare_stuck_seconds=20, lso_stall_seconds=20,
                       verification_grace_seconds=10),
        alert_rules=dict(hanging_transaction=dict(for_seconds=0), lso_stall=dict(for_seconds=10),
                         transaction_timeout_exceeded=dict(for_seconds=10), prepare_stuck=dict(for_seconds=10),
                         cluster_down=dict(for_seconds=30), transactions_cannot_commit=dict(for_seconds=10),
                         # 5 min by default: the demo's hanging transaction would leave it pending throughout.
                         verification_failure_rate=dict(for_seconds=30)),
        api=dict(host="127.0.0.1", port=port),
        # The console's abort line must run as printed: this virtualenv's script, not a `txnwatch` on PATH.
        console=dict(cli_command=commands.program()),
        retention=dict(days=1, archive_dir=str(var_dir / "archive")),
    )


def banner(port: int, bootstrap: str, lab_dir: Path, topic: str, prog: str | None = None) -> str:
    from txnwatch.core import commands

    base = f"http://127.0.0.1:{port}"
    prog = prog or commands.program()
    return "\n".join([
        "",
        f"  >>> Open the console: {base}/console   (what hangs, what stalls, the abort command) <<<",
        "",
        "txnwatch demo is running against a local Kafka lab cluster.",
        f"  Kafka bootstrap     {bootstrap}   (lab dir {lab_dir})",
        "  Broker setting      transaction.partition.verification.enable=false (pre-KIP-890; `txnwatch lab up",
        "                      --pre-kip-890`): it is what lets the demo inject a hanging transaction. Kafka's",
        "                      default (true, KIP-890) rejects such a write; `txnwatch lab up` runs that default.",
        f"  API docs            {base}/docs",
        f"  transactions        {base}/api/v1/transactions",
        f"  hanging             {base}/api/v1/hanging        (expect one within ~1 minute)",
        f"  ... and the fix     {prog} hanging --bootstrap-server {bootstrap}",
        f"  LSO stalls          {base}/api/v1/lso-stalls",
        f"  consumer lag        {base}/api/v1/consumer-groups",
        f"  alerts              {base}/api/v1/alerts",
        "  canary              a transaction a partition every 5 s on _txnwatch_canary: txnwatch_canary_* on /metrics",
        f"  Prometheus metrics  http://127.0.0.1:{port + 1}/metrics   (the metrics port; {base}/metrics too)",
        "  Kafka's own view    .venv/bin/txnwatch lab kafka-transactions --lab-dir "
        f"{lab_dir} find-hanging --topic {topic} --max-transaction-timeout 1",
        "Stop with Ctrl-C (the lab cluster stops with it).",
        "",
    ])


def run_demo(port: int, var_dir: Path, brokers: int) -> None:
    from txnwatch.core import logs
    from txnwatch.core.config import load_settings
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import PRE_KIP_890, LabSettings
    from txnwatch.lab.workload import Workload
    from txnwatch.supervise.daemon import serve

    logs.configure("INFO", "text")
    var_dir.mkdir(parents=True, exist_ok=True)
    lab_dir = var_dir / "lab"
    # Pre-KIP-890 on purpose: the demo shows a hanging transaction, which verification would reject.
    lab = start_lab(LabSettings(brokers=brokers, transactions=PRE_KIP_890, jmx_exporter=True), lab_dir, die_with_parent=True)
    workload = None
    try:
        workload = Workload(lab.bootstrap_servers, "demo", lab=lab, seed=7).start()
        settings = load_settings(None, **demo_overrides(lab.bootstrap_servers, port, var_dir,
                                                              lab.broker_metrics_urls()))
        print(banner(port, lab.bootstrap_servers, lab_dir, workload.input_topic), file=sys.stderr, flush=True)
        serve(settings)
    finally:
        if workload is not None:
            workload.stop(timeout=10)
        lab.down()
        # The last line a person sees: nothing of the demo is left running (the data stays for a look).
        print(f"txnwatch demo stopped: the daemon, the workload and the lab's {brokers} Kafka broker(s) are down; "
              f"its data stays in {var_dir}.", file=sys.stderr, flush=True)
