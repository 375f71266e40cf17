"""The brokers' other transaction signals through a real broker's JMX exporter agent (the lab's rules),
against txnwatch's own poll of the same partition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from txnwatch.core.model import TopicPartition
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
from txnwatch.lab.faults import transactional_producer, unique_transactional_id

pytestmark = [pytest.mark.lab]


def test_the_brokers_lso_lag_equals_txnwatchs_hwm_minus_lso_while_a_transaction_is_open(
        kafka4_lab: Any, new_topic_on: Callable[..., str]) -> None:
    bootstrap = kafka4_lab.bootstrap_servers
    topic = new_topic_on(kafka4_lab, partitions=1, replication=1)
    producer = transactional_producer(bootstrap, unique_transactional_id("signals"), 15_000)
    urls = {str(k): v for k, v in kafka4_lab.broker_metrics_urls().items()}
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=bootstrap, topics_include=(topic,),
                                         broker_metrics_urls=tuple(urls.items()))
    try:
        producer.begin_transaction()
        producer.send(topic, b"committed", partition=0).get(timeout=30)
        producer.commit_transaction()
        producer.begin_transaction()
        for _ in range(3):  # left open: the LSO stays at the first of these three, the HWM after them
            producer.send(topic, b"open", partition=0).get(timeout=30)
        with ClusterConnection(settings) as connection:
            deadline = time.monotonic() + 30
            while True:  # the commit marker is written after commit_transaction() returns
                snapshot = connection.poll()
                partition = snapshot.partitions[TopicPartition(topic, 0)]
                (broker,) = snapshot.broker_verification
                lags = {(t, p): v for t, p, v in broker.signals.lso_lag or ()}
                if partition.last_stable_offset == 2 or time.monotonic() > deadline:
                    break
                time.sleep(0.5)
    finally:
        producer.abort_transaction()
        producer.close(timeout=5)
    assert (partition.high_watermark, partition.last_stable_offset) == (5, 2)  # record, marker, 3 open records
    assert lags[(topic, 0)] == 5 - 2 == 3  # the broker agrees with txnwatch's poll, checked just above
    s = broker.signals
    assert s.late_transaction_partitions == 0  # open for seconds, not past transaction.max.timeout.ms
    assert (s.marker_unknown_destination_queue, s.marker_log_append_retry_queue) == (0, 0)
    # Kafka's load time is a sampled sensor (2 windows of 30 s): a broker whose coordinator loaded its partitions
    # within the last minute reports a figure, one on a shared lab that has been up longer reports none (NaN).
    assert (s.coordinator_load_ms_max is None) == (s.coordinator_load_ms_avg is None)
    if s.coordinator_load_ms_max is not None and s.coordinator_load_ms_avg is not None:
        assert s.coordinator_load_ms_max >= s.coordinator_load_ms_avg >= 0
