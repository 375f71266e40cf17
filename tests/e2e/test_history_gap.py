"""A compaction gap in __transaction_state is reported, never silent (issue 26 item 5).

On Kafka 4.1.1 and 4.4.0, a one-broker lab whose transaction log compacts within seconds (tiny segments, any dirty ratio, a busy
cleaner).  The daemon reads the log and stops; one producer then commits hundreds of transactions on the
same id, so the cleaner keeps only the newest record of it and the offsets after the daemon's stored
position vanish; the daemon starts again from that position and must say so: metric, API, console.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.lab.faults import transactional_producer, unique_transactional_id
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

pytestmark = [pytest.mark.lab, pytest.mark.slow]
CLUSTER = "compacting"
TXN_LOG = "__transaction_state"

#: Segments roll every second (Kafka 4 refuses segment.bytes under 1 MiB) and the cleaner compacts any closed
#: segment at once.
COMPACTING = {"log.roll.ms": "1000", "log.cleaner.min.cleanable.ratio": "0.01", "log.cleaner.backoff.ms": "200",
              "log.cleaner.min.compaction.lag.ms": "0"}


@pytest.fixture(scope="module", params=[DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION])
def compacting_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from txnwatch.lab.cluster import start_lab

    settings = LabSettings(brokers=1, combined=True, proxy=False, kafka_version=request.param,
                           transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS,
                                                            state_log_num_partitions=1, extra=COMPACTING))
    lab = start_lab(settings, tmp_path_factory.mktemp(f"txnwatch-lab-compacting-{request.param}"),
                    die_with_parent=True)
    try:
        yield lab
    finally:
        lab.down()


def metric(d: Daemon, name: str) -> float | None:
    for family in text_string_to_metric_families(d.get("/metrics").text):
        for sample in family.samples:
            if sample.name == name and sample.labels.get("cluster") == CLUSTER:
                return sample.value
    return None


def commit(producer: Any, topic: str, count: int) -> None:
    for i in range(count):
        producer.begin_transaction()
        producer.send(topic, b"v%d" % i)
        producer.commit_transaction()


def first_offset_from(bootstrap: str, offset: int) -> int | None:
    """The first offset of the transaction log at or after ``offset`` (what compaction left there)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        tp = KafkaTopicPartition(TXN_LOG, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        for batch in consumer.poll(timeout_ms=5_000).values():
            if batch:
                return int(batch[0].offset)
        return None
    finally:
        consumer.close()


def test_a_gap_compaction_made_while_the_daemon_was_down_is_reported(compacting_lab: Any, tmp_path: Path) -> None:
    bootstrap = compacting_lab.bootstrap_servers
    admin = compacting_lab.admin()
    from kafka.admin import NewTopic

    topic = f"gap-{int(time.time())}"
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    tid = unique_transactional_id("gap")
    producer = transactional_producer(bootstrap, tid, 10_000)
    config = dict(database_url=f"sqlite:///{tmp_path / 'txnwatch.db'}", poll_interval_seconds=2,
                  clusters=[dict(name=CLUSTER, bootstrap_servers=bootstrap)])
    try:
        commit(producer, topic, 3)
        first = start_daemon(**config)
        try:
            wait_for(lambda: metric(first, "txnwatch_txnlog_lag_records") == 0
                     and (metric(first, "txnwatch_txnlog_records_total") or 0) > 0, 90, what="the log read")
        finally:
            first.stop()
        with sqlite3.connect(tmp_path / "txnwatch.db") as db:
            ((stored,),) = db.execute("SELECT next_offset FROM txnlog_positions WHERE log_partition = 0").fetchall()
        assert stored > 0
        # Down: hundreds of commits of one id; the cleaner keeps its newest record only.
        commit(producer, topic, 300)
        wait_for(lambda: (first_offset_from(bootstrap, stored) or stored) > stored, 120,
                 what=f"the cleaner removing offset {stored} of {TXN_LOG}")
        survivor = first_offset_from(bootstrap, stored)
        assert survivor is not None and survivor > stored

        second = start_daemon(**config)
        try:
            wait_for(lambda: (metric(second, "txnwatch_history_gap_total") or 0) >= 1, 90, what="the gap reported")
            cluster = second.get(f"/api/v1/clusters/{CLUSTER}").json()
            html = second.get("/console").text
            missed = metric(second, "txnwatch_history_gap_records_total")
        finally:
            second.stop()
    finally:
        producer.close()
    gap = cluster["history_gaps"][0]
    assert (gap["log_partition"], gap["first_offset"]) == (0, stored)
    assert gap["last_offset"] >= survivor - 1 and gap["records"] == gap["last_offset"] - stored + 1
    assert missed is not None and missed >= gap["records"]
    assert gap["after"] is not None and gap["before"] is not None and gap["after"] <= gap["before"]
    assert 'data-testid="history-gaps"' in html and "lower bounds" in html
