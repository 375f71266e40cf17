"""Users run older clusters too: on Kafka 3.9.1 txnwatch finds the classic hanging transaction, as Kafka's own
3.9.1 tools do, and sees its LSO pinned below the high watermark."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_hanging_cli import cli
from tests.lab.helpers import offsets
from txnwatch.lab.cluster import start_lab
from txnwatch.lab.faults import inject_hanging_transaction
from txnwatch.lab.reference import KafkaTransactionsTool
from txnwatch.lab.settings import PRE_KIP_890, LabSettings
from txnwatch.lab.topics import create_topic, unique_topic_name

pytestmark = [pytest.mark.lab, pytest.mark.slow]
OLDER = "3.9.1"


@pytest.fixture(scope="module")
def older_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # Pre-KIP-890 (verification off): the test injects a hanging transaction.
    lab = start_lab(LabSettings(brokers=1, kafka_version=OLDER, combined=True, proxy=False, transactions=PRE_KIP_890),
                    tmp_path_factory.mktemp("txnwatch-lab-391"), die_with_parent=True)
    try:
        yield lab
    finally:
        lab.down()


def test_hanging_transaction_on_kafka_3_9(older_lab: Any) -> None:
    (log,) = Path(older_lab.lab_dir).glob("node-*/server.log")
    assert f"Kafka version: {OLDER}" in log.read_text()  # what the broker says it runs, not what was asked
    bootstrap, topic = older_lab.bootstrap_servers, unique_topic_name("older")
    admin = older_lab.admin()
    try:
        create_topic(admin, topic, partitions=1, replication=1)
        with inject_hanging_transaction(bootstrap, topic, 0) as fault:
            lso, hwm = offsets(admin, topic, 0)
            assert lso == fault.first_offset < hwm
            result = cli("-b", bootstrap, "--format", "json", "--max-transaction-timeout-ms", "0")
            assert result.returncode == 1, result.stderr
            mine = [(h["partition"], h["producer_id"], h["producer_epoch"], h["start_offset"])
                    for h in json.loads(result.stdout)["hanging"] if h["topic"] == topic]
            assert mine == [(0, fault.producer_id, fault.producer_epoch, fault.first_offset)]
            kafkas = KafkaTransactionsTool(bootstrap, OLDER).find_hanging(topic=topic, max_transaction_timeout_min=0)
            assert [(r["partition"], r["producer_id"], r["producer_epoch"], r["start_offset"]) for r in kafkas] == mine
        assert offsets(admin, topic, 0)[0] == offsets(admin, topic, 0)[1]  # aborted: the LSO caught up
    finally:
        admin.close()
