"""/metrics: the brokers' other transaction signals per broker, each optional, the LSO lag for watched
partitions from their leader only."""

from __future__ import annotations

from txnwatch.core.model import BrokerTxnSignals, BrokerVerification, ClusterSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.core.views import LatestState
from txnwatch.metrics.registry import build_registry

ORDERS0, ORDERS1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


def _registry():
    full = BrokerTxnSignals(late_transaction_partitions=3,
                            lso_lag=(("orders", 0, 120), ("orders", 1, 4), ("unwatched", 0, 9)),
                            marker_unknown_destination_queue=2, marker_log_append_retry_queue=0,
                            coordinator_load_ms_max=1500.0, coordinator_load_ms_avg=250.0)
    follower = BrokerTxnSignals(lso_lag=(("orders", 0, 118),))  # an older Kafka: only the partition gauge
    figures = (BrokerVerification("1", "u1", verifications=5, signals=full),
               BrokerVerification("2", "u2", error="no AddPartitionsToTxnManager ...", signals=follower),
               BrokerVerification("3", "u3", error="ConnectError"))
    partitions = {ORDERS0: PartitionSnapshot(ORDERS0, 1, 500, 380), ORDERS1: PartitionSnapshot(ORDERS1, 2, 9, 5)}
    state = LatestState()
    state.update("prod", snapshot=ClusterSnapshot(cluster="prod", taken_at_ms=1, duration_ms=1,
                                                  partitions=partitions, broker_verification=figures))
    return build_registry(state, lambda: True)


def test_each_signal_is_up_where_reported_and_absent_where_not():
    r = _registry()
    b1, b2 = {"cluster": "prod", "broker": "1"}, {"cluster": "prod", "broker": "2"}
    assert r.get_sample_value("txnwatch_broker_partitions_with_late_transactions", b1) == 3
    assert r.get_sample_value("txnwatch_broker_txn_marker_unknown_destination_queue", b1) == 2
    assert r.get_sample_value("txnwatch_broker_txn_marker_log_append_retry_queue", b1) == 0
    assert r.get_sample_value("txnwatch_broker_txn_coordinator_load_time_max_seconds", b1) == 1.5
    assert r.get_sample_value("txnwatch_broker_txn_coordinator_load_time_avg_seconds", b1) == 0.25
    assert r.get_sample_value("txnwatch_broker_signal_up", {**b1, "signal": "late_transactions"}) == 1
    assert r.get_sample_value("txnwatch_broker_signal_up", {**b2, "signal": "late_transactions"}) == 0
    assert r.get_sample_value("txnwatch_broker_signal_up", {**b2, "signal": "lso_lag"}) == 1
    assert r.get_sample_value("txnwatch_broker_partitions_with_late_transactions", b2) is None
    # An exporter that did not answer has no signal series: txnwatch_broker_metrics_up is 0 for it.
    assert r.get_sample_value("txnwatch_broker_signal_up", {"cluster": "prod", "broker": "3",
                                                            "signal": "lso_lag"}) is None
    assert r.get_sample_value("txnwatch_broker_metrics_up", {"cluster": "prod", "broker": "3"}) == 0


def test_lso_lag_only_for_watched_partitions_from_their_leader():
    r = _registry()

    def lag(broker: str, topic: str, partition: int) -> float | None:
        return r.get_sample_value("txnwatch_broker_partition_lso_lag", {"cluster": "prod", "broker": broker,
                                                                       "topic": topic, "partition": str(partition)})

    assert (lag("1", "orders", 0), lag("1", "orders", 1)) == (120, None)  # broker 1 leads orders-0 only
    assert lag("2", "orders", 0) is None  # broker 2 is orders-0's follower
    assert lag("1", "unwatched", 0) is None
