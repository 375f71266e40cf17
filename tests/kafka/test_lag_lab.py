"""Lag on a real cluster: kafka_exporter's formula series by series, and time lag through an LSO stall.

The reference for offset lag is Kafka's own ConsumerGroupCommand (``kafka-consumer-groups
--describe``): its LAG column is the log end offset (read_uncommitted) minus the committed
offset, which is what kafka_exporter exports as ``kafka_consumergroup_lag``.  The group's
partitions end on commit markers, where txnwatch's marker-corrected lags differ and
``kafka_consumergroup_lag`` must not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from prometheus_client.core import Metric

from tests.kafka.groups import commit_offsets
from txnwatch import detect
from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot, TopicPartition
from txnwatch.core.views import ClusterView
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
from txnwatch.lab.faults import start_lso_stall, transactional_producer, unique_transactional_id
from txnwatch.lab.reference import run_tool
from txnwatch.metrics.lag import LagMetricOptions, lag_families

pytestmark = [pytest.mark.lab]
POLL_INTERVAL_S = 1.0


def _consumer_group_command(bootstrap: str, group: str, kafka_version: str) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (CURRENT-OFFSET, LAG) as kafka-consumer-groups prints them ('-' for none: -1)."""
    out = run_tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "--bootstrap-server", bootstrap,
                   "--describe", "--group", group, kafka_version=kafka_version, name="kafka-consumer-groups")
    rows: dict[tuple[str, int], tuple[int, int]] = {}
    for line in out.splitlines():
        cells = line.split()
        if len(cells) >= 6 and cells[0] == group and cells[2].isdigit():
            as_int = [-1 if c == "-" else int(c) for c in cells[3:6]]
            rows[(cells[1], int(cells[2]))] = (as_int[0], as_int[2])
    return rows


def _samples(families: list[Metric], name: str) -> dict[tuple[str, str], float]:
    return {(s.labels["topic"], s.labels["partition"]): s.value
            for f in families if f.name == name for s in f.samples}


def _poll(connection: ClusterConnection, state: detect.DetectorState) -> tuple[ClusterSnapshot, detect.DetectorState,
                                                                                 Findings]:
    snapshot = connection.poll()
    state, findings = detect.evaluate(state, snapshot, snapshot.taken_at_ms)
    return snapshot, state, findings


def test_kafka_consumergroup_lag_equals_kafka_exporters_on_partitions_ending_on_markers(
        lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=3, replication=1)
    bootstrap = lab_cluster.bootstrap_servers
    producer = transactional_producer(bootstrap, unique_transactional_id("lag-exporter"), 10_000)
    try:
        for partition, count in ((0, 4), (1, 6)):
            producer.begin_transaction()
            last = [producer.send(topic, b"v", partition=partition) for _ in range(count)][-1].get(timeout=30)
            producer.commit_transaction()
            assert last.offset == count - 1  # the commit marker follows at offset `count`
    finally:
        producer.close(timeout=5)
    group = f"lag-exporter-{topic}"
    # Partition 0: read everything, committed last record + 1 (the marker residual kafka_exporter counts as 1);
    # partition 1: two records behind; partition 2: nothing committed (kafka_exporter: -1).
    commit_offsets(bootstrap, group, {(topic, 0): 4, (topic, 1): 5})
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=bootstrap, topics_include=(topic,))
    with ClusterConnection(settings) as connection:
        deadline = time.monotonic() + 60
        while True:  # the commit markers are written asynchronously after commit_transaction()
            snapshot, _, findings = _poll(connection, detect.INITIAL)
            hwms = [snapshot.partitions[TopicPartition(topic, p)].high_watermark for p in range(3)]
            if hwms == [5, 7, 0] or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert hwms == [5, 7, 0]
    view = ClusterView(name="lab", up=True, snapshot=snapshot, findings=findings)
    families = list(lag_families([view], LagMetricOptions()))
    exported = _samples(families, "kafka_consumergroup_lag")
    committed = _samples(families, "kafka_consumergroup_current_offset")
    reference = _consumer_group_command(bootstrap, group, lab_cluster.kafka_version)
    # Where the group committed, kafka_exporter's lag is the tool's LAG (log end offset - committed offset) ...
    assert reference == {(topic, 0): (4, 1), (topic, 1): (5, 2)}
    assert {k: v for k, v in exported.items() if k[1] != "2"} == {(t, str(p)): float(lag)
                                                                   for (t, p), (_, lag) in reference.items()}
    # ... and a partition of a consumed topic with no commit is -1 (kafka_exporter.go: "lag = -1").
    assert exported[(topic, "2")] == -1.0
    assert committed == {(topic, "0"): 4.0, (topic, "1"): 5.0, (topic, "2"): -1.0}
    assert _samples(families, "txnwatch_consumergroup_lag_hwm") == {(topic, "0"): 0.0, (topic, "1"): 2.0}
    assert _samples(families, "txnwatch_consumergroup_lag_lso") == {(topic, "0"): 0.0, (topic, "1"): 2.0}
    sums = {s.labels["topic"]: s.value for f in families if f.name == "kafka_consumergroup_lag_sum" for s in f.samples}
    assert sums == {topic: 3.0}


def test_time_lag_is_exact_through_an_lso_stall(lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1, replication=1)
    bootstrap = lab_cluster.bootstrap_servers
    group = f"lag-stall-{topic}"
    # As long as the lab allows: the stall outlives polls that list no group.
    stall = start_lso_stall(bootstrap, topic, transaction_timeout_ms=lab_cluster.transaction_max_timeout_ms)
    try:
        # The group has read everything before the open transaction: a read_committed consumer waits at the LSO.
        commit_offsets(bootstrap, group, {(topic, 0): stall.first_offset})
        first_record_ms = _first_record_timestamp(bootstrap, topic, stall.first_offset)
        settings = ClusterConnectionSettings(name="lab", bootstrap_servers=bootstrap, topics_include=(topic,))
        state = detect.INITIAL
        seen: list[tuple[int | None, float | None, float]] = []  # (lag against the LSO, time lag, the truth)
        with ClusterConnection(settings) as connection:
            deadline = time.monotonic() + 90
            while len(seen) < 6:
                snapshot, state, findings = _poll(connection, state)
                rows = [r for r in findings.lags if r.group_id == group]
                # A poll may not list the group yet (committed a moment ago) or while its coordinator moves after
                # an earlier failover test: that poll measures nothing, the next one is asked.
                assert rows or time.monotonic() < deadline, f"no poll in 90 s listed {group}; measured {seen}"
                if rows:
                    (row,) = rows
                    truth_s = (snapshot.taken_at_ms - first_record_ms) / 1000
                    seen.append((row.lag_lso, row.lag_seconds, truth_s))
                time.sleep(POLL_INTERVAL_S)
            fetched = connection._record_dates.fetched  # one fetch, then the cache answers
    finally:
        stall.clear()
    assert all(lag_lso == 0 for lag_lso, _, _ in seen), seen  # nothing readable: the LSO holds the group
    measured = [seconds for _, seconds, _ in seen]
    assert None not in measured, seen
    assert all(abs((s or 0.0) - truth) < POLL_INTERVAL_S for s, (_, _, truth) in zip(measured, seen, strict=True)), seen
    assert (measured[-1] or 0.0) > (measured[0] or 0.0) + 3 * POLL_INTERVAL_S, seen  # grows with the stall
    assert fetched == 1


def _first_record_timestamp(bootstrap: str, topic: str, offset: int) -> int:
    """The record's timestamp as the broker stores it, read by a plain read_uncommitted consumer."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_uncommitted")
    try:
        tp = KafkaTopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                return int(records[0].timestamp)
        raise AssertionError("the stalled transaction's first record could not be read")
    finally:
        consumer.close()
