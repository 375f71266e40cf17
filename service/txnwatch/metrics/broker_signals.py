"""The brokers' other transaction signals, mirrored from the latest poll beside txnwatch's own figures.

Read from the same JMX exporters as verification (kafka.broker_signals).  Each signal is optional
per broker: ``txnwatch_broker_signal_up{signal}`` is 1 where the broker's exporter reported it in
the last poll and 0 where it answered without it (no series at all for a broker whose exporter did
not answer; ``txnwatch_broker_metrics_up`` says that).  The broker's per-partition LastStableOffsetLag
is exported only for the partitions txnwatch watches, from their leader where the broker label is a
node id (every replica keeps its own LSO; the leader's is the one consumers see): the series count
stays that of ``txnwatch_partition_*``.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from txnwatch.core.model import BrokerTxnSignals, ClusterSnapshot, TopicPartition
from txnwatch.core.views import ClusterView, LatestState

BROKER = ["cluster", "broker"]
#: signal label -> does the broker's answer carry it
SIGNALS = {
    "late_transactions": lambda s: s.late_transaction_partitions is not None,
    "lso_lag": lambda s: s.lso_lag is not None,
    "marker_unknown_destination_queue": lambda s: s.marker_unknown_destination_queue is not None,
    "marker_log_append_retry_queue": lambda s: s.marker_log_append_retry_queue is not None,
    "coordinator_load_time": lambda s: s.coordinator_load_ms_max is not None or s.coordinator_load_ms_avg is not None,
}


class BrokerSignalsCollector(Collector):
    """Renders the brokers' signals from the latest state (never waits on an exporter)."""

    def __init__(self, state: LatestState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        yield from broker_signal_families(self._state.views())


def broker_signal_families(views: list[ClusterView]) -> Iterator[Metric]:
    up = GaugeMetricFamily("txnwatch_broker_signal_up", "1 if the broker's JMX exporter reported this transaction "
                           "signal in the last poll, 0 if it answered without it.", labels=[*BROKER, "signal"])
    late = GaugeMetricFamily(
        "txnwatch_broker_partitions_with_late_transactions", "The broker's ReplicaManager "
        "PartitionsWithLateTransactionsCount: partitions it leads with a transaction open longer than "
        "transaction.max.timeout.ms.", labels=BROKER)
    lso_lag = GaugeMetricFamily(
        "txnwatch_broker_partition_lso_lag", "The broker's kafka.cluster:type=Partition,name=LastStableOffsetLag "
        "(its high watermark minus its LSO, in offsets), for watched partitions, from their leader.",
        labels=[*BROKER, "topic", "partition"])
    unknown = GaugeMetricFamily(
        "txnwatch_broker_txn_marker_unknown_destination_queue", "The broker's TransactionMarkerChannelManager "
        "UnknownDestinationQueueSize: transaction markers waiting for their partition's leader to be known.",
        labels=BROKER)
    retry = GaugeMetricFamily(
        "txnwatch_broker_txn_marker_log_append_retry_queue", "The broker's TransactionMarkerChannelManager "
        "LogAppendRetryQueueSize: transactions whose markers are written but whose completion the coordinator "
        "must log again.", labels=BROKER)
    load_max = GaugeMetricFamily(
        "txnwatch_broker_txn_coordinator_load_time_max_seconds", "The broker's transaction-coordinator-metrics "
        "partition-load-time-max: the longest load of a __transaction_state partition (Kafka's 30 s window), "
        "in seconds.", labels=BROKER)
    load_avg = GaugeMetricFamily(
        "txnwatch_broker_txn_coordinator_load_time_avg_seconds", "The broker's transaction-coordinator-metrics "
        "partition-load-time-avg, in seconds.", labels=BROKER)
    for view in views:
        snapshot = view.snapshot
        for b in snapshot.broker_verification if snapshot is not None else ():
            if b.error is not None and b.signals == BrokerTxnSignals():
                continue  # the exporter did not answer (or answered nothing usable): broker_metrics_up says so
            labels, s = [view.name, b.broker], b.signals
            for signal, present in SIGNALS.items():
                up.add_metric([*labels, signal], 1.0 if present(s) else 0.0)
            if s.late_transaction_partitions is not None:
                late.add_metric(labels, s.late_transaction_partitions)
            for topic, partition, lag in _watched(s.lso_lag or (), snapshot, b.broker):
                lso_lag.add_metric([*labels, topic, str(partition)], lag)
            if s.marker_unknown_destination_queue is not None:
                unknown.add_metric(labels, s.marker_unknown_destination_queue)
            if s.marker_log_append_retry_queue is not None:
                retry.add_metric(labels, s.marker_log_append_retry_queue)
            if s.coordinator_load_ms_max is not None:
                load_max.add_metric(labels, s.coordinator_load_ms_max / 1000)
            if s.coordinator_load_ms_avg is not None:
                load_avg.add_metric(labels, s.coordinator_load_ms_avg / 1000)
    yield from (up, late, lso_lag, unknown, retry, load_max, load_avg)


def _watched(lags: tuple[tuple[str, int, int], ...], snapshot: ClusterSnapshot | None,
             broker: str) -> Iterator[tuple[str, int, int]]:
    if snapshot is None:
        return
    for topic, partition, lag in lags:
        watched = snapshot.partitions.get(TopicPartition(topic, partition))
        if watched is None:
            continue
        if broker.isdigit() and watched.leader is not None and int(broker) != watched.leader:
            continue  # a follower's copy
        yield topic, partition, lag
