"""`txnwatch lab up/status/down` as a user runs them: a separate one-broker cluster in its own dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from txnwatch.lab.processes import process_state

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def _lab(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "txnwatch.lab", *args], capture_output=True, text=True,
                          timeout=180, check=check)


def test_up_status_kafka_transactions_down(tmp_path):
    if os.environ.get("TXNWATCH_LAB_BOOTSTRAP"):
        pytest.skip("uses its own cluster")
    lab_dir = str(tmp_path / "cli-lab")
    try:
        up = _lab("up", "--brokers", "1", "--dir", lab_dir, "--transaction-max-timeout-ms", "20000")
        assert up.stdout.strip().startswith("127.0.0.1:"), up.stderr
        assert "cluster up in" in up.stderr
        status = json.loads(_lab("status", "--dir", lab_dir, "--json").stdout)
        assert status["transaction_max_timeout_ms"] == 20000
        assert [n["state"] for n in status["nodes"]] == ["running", "running"]
        listing = _lab("kafka-transactions", "--dir", lab_dir, "list").stdout
        assert listing.startswith("TransactionalId")
        second = _lab("up", "--brokers", "1", "--dir", lab_dir, check=False)
        assert second.returncode == 1 and "already running" in second.stderr
        assert _lab("up", "--brokers", "1", "--dir", lab_dir, "--reuse").stdout == up.stdout
        _lab("workload", "--scenario", "steady", "--background", "--report-every", "2", "--dir", lab_dir)
        workload_pid = json.loads(_lab("status", "--dir", lab_dir, "--json").stdout)["workloads"]["steady"]["pid"]
        log = tmp_path / "cli-lab" / "workload-steady.log"
        deadline = time.monotonic() + 60
        while "transactions_committed" not in log.read_text() and "committed " not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(1)
    finally:
        _lab("down", "--dir", lab_dir, check=False)
    for node in status["nodes"]:
        assert process_state(node["pid"], lab_dir) == "dead"
    assert process_state(status["proxy"]["pid"], lab_dir) == "dead"
    assert process_state(workload_pid, lab_dir) == "dead"
