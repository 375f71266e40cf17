"""The workload generator against the shared lab: real transactions, both isolation levels, CTP."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.lab.helpers import offsets, wait_for
from txnwatch.cli.demo import banner
from txnwatch.lab.reference import parse_find_hanging, run_kafka_transactions
from txnwatch.lab.topics import unique_topic_name
from txnwatch.lab.workload import Scenario, Workload

pytestmark = [pytest.mark.lab, pytest.mark.slow]


def test_steady_workload_commits_aborts_and_hides_aborted_data_from_read_committed(lab_cluster):
    scenario = Scenario(name="test", producers=2, transactions_per_second=5, abort_ratio=0.3, partitions=2)
    workload = Workload(lab_cluster.bootstrap_servers, scenario, topic_prefix=unique_topic_name("wl"), seed=7,
                        lab=lab_cluster)
    rc = f"{workload.prefix}-read-committed-0"
    ru = f"{workload.prefix}-read-uncommitted-0"
    with workload:
        # Until each part has been seen, not a fixed time: a loaded machine can take long over a consumer's first
        # fetch (a fixed 12 s once ended with the read_committed consumer still joining).
        wait_for(lambda: workload.stats.transactions_committed > 5 and workload.stats.transactions_aborted > 0
                 and workload.stats.ctp_transactions > 0, timeout=90, what="commits, aborts and a CTP transaction")
        wait_for(lambda: workload.stats.consumed.get(rc, 0) > 0 and workload.stats.aborted_records_seen.get(ru, 0) > 0,
                 timeout=90, what="both consumers reading, read_uncommitted past an aborted record")
    stats = workload.stats
    assert stats.consumed[rc] > 0
    assert stats.aborted_records_seen[rc] == 0  # the whole point of read_committed
    assert stats.aborted_records_seen[ru] > 0   # aborted data is in the log; read_uncommitted shows it


def test_demo_scenario_injects_its_standing_faults(lab_cluster):
    workload = Workload(lab_cluster.bootstrap_servers, "demo", topic_prefix=unique_topic_name("demo"), lab=lab_cluster)
    with workload:
        wait_for(lambda: {"hanging", "lso_stall"} <= set(workload.stats.faults_injected), timeout=40,
                 what="demo faults")
        wait_for(lambda: workload.stats.transactions_committed > 0, what="a committed transaction")
        admin = lab_cluster.admin()
        try:
            lso, hwm = offsets(admin, workload.input_topic, 0)
            assert lso < hwm  # the demo's hanging transaction pins partition 0
        finally:
            admin.close()
        # The banner tells a newcomer how to ask Kafka itself; Kafka must accept that command.
        text = banner(8080, lab_cluster.bootstrap_servers, Path("lab"), workload.input_topic)
        assert "transaction.partition.verification.enable=false" in text and "--pre-kip-890" in text
        args = _banner_reference_args(text)
        assert args[0] == "find-hanging"
        output = run_kafka_transactions(lab_cluster.bootstrap_servers, *args, kafka_version=lab_cluster.kafka_version)
        assert {row["topic"] for row in parse_find_hanging(output)} <= {workload.input_topic}
        # Kafka's own Java transactional producer runs beside the kafka-python ones.
        assert list(workload.stats.java_producers) == [f"{workload.prefix}-java-0"]
        (java,) = workload._java
        wait_for(lambda: "records sent" in java.output(), timeout=60, what="the Java producer's first report")
        assert java.running(), java.output()[-2000:]


def _banner_reference_args(text: str) -> list[str]:
    """The arguments after `kafka-transactions --lab-dir DIR` in the demo banner's reference command."""
    line = next(ln for ln in text.splitlines() if "kafka-transactions" in ln)
    words = shlex.split(line.split("Kafka's own view", 1)[1])
    return words[words.index("--lab-dir") + 2:]

