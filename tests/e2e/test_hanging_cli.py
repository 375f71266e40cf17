"""`txnwatch hanging` against the lab: the same verdict as Kafka's find-hanging, as exit code and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest

from txnwatch.lab.faults import inject_hanging_transaction

pytestmark = pytest.mark.lab


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "txnwatch", "hanging", *args], capture_output=True, text=True,
                          timeout=120)


def test_hanging_cli_exit_codes_and_json(lab_cluster: Any, new_topic: Callable[..., str],
                                         kafka_transactions: Any) -> None:
    topic = new_topic(partitions=1)
    bootstrap = lab_cluster.bootstrap_servers
    with inject_hanging_transaction(bootstrap, topic, 0) as fault:
        result = cli("-b", bootstrap, "--format", "json", "--max-transaction-timeout-ms", "0")
        assert result.returncode == 1, result.stderr
        mine = [h for h in json.loads(result.stdout)["hanging"] if h["topic"] == topic]
        assert [(h["partition"], h["producer_id"], h["producer_epoch"], h["start_offset"]) for h in mine] == [
            (0, fault.producer_id, fault.producer_epoch, fault.first_offset)]
        kafkas = kafka_transactions.find_hanging(topic=topic, max_transaction_timeout_min=0)
        assert {(r["partition"], r["producer_id"]) for r in kafkas} == {(h["partition"], h["producer_id"]) for h in mine}
        table = cli("-b", bootstrap, "--max-transaction-timeout-ms", "0")
        assert table.returncode == 1 and str(fault.producer_id) in table.stdout
    after = cli("-b", bootstrap, "--format", "json", "--max-transaction-timeout-ms", "0")
    assert not [h for h in json.loads(after.stdout)["hanging"] if h["topic"] == topic]


def test_hanging_cli_usage_errors() -> None:
    assert cli("-b", "not-a-server").returncode == 2
    assert cli("-b", "127.0.0.1:9", "--format", "xml").returncode == 2
    unreachable = cli("-b", "127.0.0.1:9")
    assert unreachable.returncode == 3 and "unreachable" in unreachable.stderr
