"""Lag in records on a real broker: what a real read_committed consumer reads to catch up, markers and aborts apart.

The reference is kafka-python's own consumer with ``isolation_level='read_committed'``, started at the
group's committed offset and read to the end: the number of records it receives is the lag in records.
Partition 0 holds one-record transactions (half its offsets are markers), partition 1 hundred-record
ones; both abort some, whose records the consumer never gets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from tests.kafka.groups import commit_offsets
from txnwatch import detect
from txnwatch.core.findings import GroupLag
from txnwatch.core.model import TopicPartition
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
from txnwatch.lab.faults import transactional_producer, unique_transactional_id

pytestmark = [pytest.mark.lab]


def _write(bootstrap: str, topic: str) -> None:
    producer = transactional_producer(bootstrap, unique_transactional_id("record-lag"), 15_000)
    try:
        for index in range(30):  # partition 0: 30 one-record transactions, every third aborted
            producer.begin_transaction()
            producer.send(topic, b"one", partition=0).get(timeout=30)
            producer.abort_transaction() if index % 3 == 2 else producer.commit_transaction()
        for index in range(5):  # partition 1: 5 hundred-record transactions, the second and fourth aborted
            producer.begin_transaction()
            for _ in range(100):
                producer.send(topic, b"hundred", partition=1)
            producer.flush()
            producer.abort_transaction() if index in (1, 3) else producer.commit_transaction()
    finally:
        producer.close(timeout=5)


def _read_committed(bootstrap: str, topic: str, partition: int, start: int, end: int) -> int:
    """Records a read_committed consumer receives from ``start`` until its position reaches ``end`` (the LSO)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed")
    try:
        tp = KafkaTopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, start)
        received, deadline = 0, time.monotonic() + 60
        while consumer.position(tp) < end and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                received += len(records)
        assert consumer.position(tp) >= end, "the read_committed consumer did not reach the LSO"
        return received
    finally:
        consumer.close()


def test_record_lag_is_what_a_read_committed_consumer_reads(kafka4_lab: Any,
                                                            new_topic_on: Callable[..., str]) -> None:
    bootstrap = kafka4_lab.bootstrap_servers
    topic = new_topic_on(kafka4_lab, partitions=2, replication=1)
    _write(bootstrap, topic)
    group = f"record-lag-{topic}"
    # Partition 0: 60 offsets (record + marker each); offset 13 is a record's.  Partition 1: 505 offsets; offset
    # 150 lies inside the second (aborted) transaction, 250 is past its marker, inside the third.
    committed = {0: 13, 1: 150}
    commit_offsets(bootstrap, group, {(topic, p): o for p, o in committed.items()})
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=bootstrap, topics_include=(topic,))
    rows: dict[int, GroupLag] = {}
    with ClusterConnection(settings) as connection:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # markers are written after commit/abort returns; the count may take polls
            snapshot = connection.poll()
            _, findings = detect.evaluate(detect.INITIAL, snapshot, snapshot.taken_at_ms)
            rows = {r.tp.partition: r for r in findings.lags if r.group_id == group}
            lsos = [snapshot.partitions[TopicPartition(topic, p)].last_stable_offset for p in (0, 1)]
            if lsos == [60, 505] and all(r.lag_records is not None for r in rows.values()) and len(rows) == 2:
                break
            time.sleep(0.5)
    assert lsos == [60, 505]
    truth = {p: _read_committed(bootstrap, topic, p, committed[p], end) for p, end in ((0, 60), (1, 505))}
    assert {p: r.lag_records for p, r in rows.items()} == truth
    # And against the history written above.  Partition 0: offset 13 is transaction 6's marker; transactions
    # 7..29 follow, 8 of them aborted (8, 11, ..., 29): 15 records.  Partition 1: transaction j holds offsets
    # 101j..101j+99 and its marker 101j+100; from 150 (inside aborted transaction 1) the committed ones are 2 and 4.
    assert truth == {0: 15, 1: 200}
    # Offset lag overstates both: markers on partition 0, aborted records and markers on partition 1.
    assert rows[0].lag_lso == 60 - 13 and rows[1].lag_lso == 505 - 150
