"""A transaction-version-2 hanging transaction made by an unclean leader election (KAFKA-20716), per Kafka line.

On 4.1.1 (WriteTxnMarkers v1) and 4.4.0 (v2, KIP-1228), each on its own 2-broker lab formatted with transaction
version 2 and partition verification on (Kafka's defaults): the lab drops a COMMIT marker the way production does
(txnwatch.lab.unclean), then

* Kafka's own `kafka-transactions find-hanging` (the tools of the nearest release that has them) and one
  `txnwatch hanging` poll list the same partition, producer id, epoch and start offset;
* `txnwatch abort --start-offset ... --execute` ends it: the partition's LSO reaches its high watermark, and
  Kafka's tool no longer calls anything hanging.

One lab at a time (module-scoped, one version per module instance), each stopped at the end.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.lab.helpers import offsets, wait_for
from txnwatch.lab import unclean
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION
from txnwatch.lab.reference import KafkaTransactionsTool
from txnwatch.lab.topics import create_topic, unique_topic_name

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture(scope="module", params=[DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION])
def two_broker_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

    version = request.param
    lab = start_lab(LabSettings(brokers=2, kafka_version=version, combined=False, proxy=False,
                                transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS,
                                                                 extra=unclean.UNCLEAN_BROKER_PROPERTIES)),
                    tmp_path_factory.mktemp(f"txnwatch-lab-unclean-{version}"), die_with_parent=True, quiet=True)
    try:
        yield lab
    finally:
        lab.down()


def txnwatch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "txnwatch", *args], capture_output=True, text=True, timeout=120)


def test_lost_commit_marker_is_found_like_kafka_and_aborted(two_broker_lab: Any) -> None:
    lab = two_broker_lab
    bootstrap = lab.bootstrap_servers
    admin = lab.admin()
    try:
        topic = create_topic(admin, unique_topic_name("lost-marker"), partitions=1, replication=2,
                             configs=unclean.UNCLEAN_TOPIC_CONFIGS)
    finally:
        admin.close()
    fault = unclean.lose_commit_marker(lab, topic, records=2)
    ref = KafkaTransactionsTool(bootstrap, lab.kafka_version)
    admin = lab.admin()
    try:
        # The fault is KAFKA-20716's: the coordinator completed the commit (TV2 bumped the epoch), the new leader
        # still has the transaction open at the epoch of its records, and read_committed readers are stuck.
        described = ref.describe(fault.transactional_id)
        assert (described["transaction_state"], described["topic_partitions"]) == ("CompleteCommit", [])
        assert described["producer_epoch"] == fault.committed_epoch == fault.producer_epoch + 1
        assert lab.leader_of(topic, 0) == fault.new_leader != fault.old_leader
        lso, hwm = offsets(admin, topic, 0)
        assert lso == fault.first_offset < hwm

        kafkas = [(r["topic"], r["partition"], r["producer_id"], r["producer_epoch"], r["start_offset"])
                  for r in ref.find_hanging(topic=topic, max_transaction_timeout_min=0)]
        assert kafkas == [(topic, 0, fault.producer_id, fault.producer_epoch, fault.first_offset)]

        poll = txnwatch("hanging", "-b", bootstrap, "--format", "json", "--max-transaction-timeout-ms", "0")
        assert poll.returncode == 1, poll.stderr
        ours = [(h["topic"], h["partition"], h["producer_id"], h["producer_epoch"], h["start_offset"])
                for h in json.loads(poll.stdout)["hanging"] if h["topic"] == topic]
        assert ours == kafkas

        aborted = txnwatch("abort", "-b", bootstrap, "--topic", topic, "--partition", "0",
                           "--start-offset", str(fault.first_offset), "--execute")
        assert aborted.returncode == 0, aborted.stdout + aborted.stderr
        lso, hwm = wait_for(lambda: (o := offsets(admin, topic, 0))[0] == o[1] and o, timeout=60,
                            what="LSO == HWM after txnwatch abort")
        assert lso == hwm == fault.first_offset + 2 + 1  # two records, the abort marker
        assert ref.find_hanging(topic=topic, max_transaction_timeout_min=0) == []
    finally:
        admin.close()
        fault.clear()
