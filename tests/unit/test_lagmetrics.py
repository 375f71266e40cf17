"""Lag families: kafka_exporter's label layout made configurable, and granularity cutting series."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from tests.unit.detect.builders import TP, TP1, partition, snapshot
from txnwatch import detect
from txnwatch.core.model import GroupSnapshot, TimeLagUnknown, TopicPartition, UnreadableRecord
from txnwatch.core.views import ClusterView, LatestState
from txnwatch.metrics.lag import Granularity, LagCollector, LagMetricOptions


def _registry(options: LagMetricOptions) -> CollectorRegistry:
    snap = snapshot(partitions=(partition(hwm=100, lso=90), partition(tp=TP1, hwm=50, lso=50)),
                    groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 80}),))
    snap = replace(snap, first_unconsumed_ms={(TP, 80): -5_000},  # the first unconsumed record is 5 s old
                   committed_records={(TP, 80): 6})  # 10 offsets to the LSO, 6 of them records
    _, findings = detect.evaluate(detect.INITIAL, snap, 0)
    state = LatestState(["c"])
    state.publish(ClusterView(name="c", up=True, snapshot=snap, findings=findings))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LagCollector(state, options))
    return registry


def test_an_unknown_time_lag_is_a_series_with_its_reason_and_no_lag_seconds() -> None:
    snap = snapshot(partitions=(partition(hwm=100, lso=90),), groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 80}),))
    bomb = UnreadableRecord(TimeLagUnknown.RECORD_OVER_BUDGET, "record 80: it lies past the first 8 MiB")
    snap = replace(snap, unreadable_records={(TP, 80): bomb})
    _, findings = detect.evaluate(detect.INITIAL, snap, 0)
    state = LatestState(["c"])
    state.publish(ClusterView(name="c", up=True, snapshot=snap, findings=findings))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LagCollector(state, LagMetricOptions()))
    labels = {"cluster": "c", "consumergroup": "g", "topic": "orders", "partition": "0"}
    assert registry.get_sample_value("txnwatch_consumergroup_lag_seconds_unknown",
                                     {**labels, "reason": "record_over_budget"}) == 1
    assert registry.get_sample_value("txnwatch_consumergroup_lag_seconds", labels) is None
    assert registry.get_sample_value("txnwatch_consumergroup_lag_lso", labels) == 10  # offsets still known
    assert registry.get_sample_value("txnwatch_consumergroup_lag_seconds_unknown",
                                     {**labels, "partition": "1", "reason": "record_over_budget"}) is None


def test_partition_granularity_exports_kafka_exporter_series_and_topic_sums() -> None:
    r = _registry(LagMetricOptions())
    group = {"cluster": "c", "consumergroup": "g", "topic": "orders"}
    assert r.get_sample_value("kafka_consumergroup_lag", {**group, "partition": "0"}) == 20
    assert r.get_sample_value("kafka_consumergroup_lag", {**group, "partition": "1"}) == -1
    assert r.get_sample_value("kafka_consumergroup_current_offset", {**group, "partition": "1"}) == -1
    assert r.get_sample_value("kafka_consumergroup_lag_sum", group) == 20
    assert r.get_sample_value("txnwatch_consumergroup_lag_lso", {**group, "partition": "0"}) == 10
    assert r.get_sample_value("txnwatch_consumergroup_topic_lag_lso", group) == 10
    assert r.get_sample_value("txnwatch_consumergroup_lag_seconds", {**group, "partition": "0"}) == 5


def test_topic_granularity_drops_per_partition_group_series_only() -> None:
    text = generate_latest(_registry(LagMetricOptions(granularity="topic"))).decode()
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert not [s for s in series if 'consumergroup="' in s and 'partition="' in s], series
    assert any(s.startswith("kafka_topic_partition_current_offset{") for s in series)  # not per group: kept
    assert any(s.startswith("kafka_consumergroup_lag_sum{") for s in series)
    assert any(s.startswith("txnwatch_consumergroup_topic_lag_lso{") for s in series)


def test_kafka_exporter_labels_are_configurable() -> None:
    r = _registry(LagMetricOptions(cluster_label="", cluster_labels={"c": {"env": "prod"}}))
    labels = {"consumergroup": "g", "topic": "orders", "partition": "0", "env": "prod"}
    assert r.get_sample_value("kafka_consumergroup_lag", labels) == 20
    assert r.get_sample_value("kafka_topic_partition_current_offset",
                              {"topic": "orders", "partition": "0", "env": "prod"}) == 100
    # txnwatch's own families keep their cluster label whatever kafka_exporter's layout is.
    assert r.get_sample_value("txnwatch_consumergroup_lag_lso",
                              {"cluster": "c", "consumergroup": "g", "topic": "orders", "partition": "0"}) == 10


def test_dashboards_query_only_lag_series_that_both_granularities_export() -> None:
    from tests.deploy.tools import dashboard_exprs, dashboard_files, load_dashboard, promql_metric_names

    every = {f.name for f in _registry(LagMetricOptions()).collect()}
    exported = {}
    granularity: Granularity
    for granularity in ("partition", "topic"):
        families = _registry(LagMetricOptions(granularity=granularity)).collect()
        exported[granularity] = {f.name for f in families if f.samples}
    queried = {name for path in dashboard_files() for _, expr in dashboard_exprs(load_dashboard(path))
               for name in promql_metric_names(expr)} & every
    assert queried, "the dashboards query no lag family at all"
    assert queried <= exported["partition"] & exported["topic"], queried - exported["topic"]


def test_caps_show_on_metrics_as_series_left_out_and_counted() -> None:
    """/metrics exports the kept groups only and counts the rest (txnwatch_cardinality_omitted)."""
    from txnwatch.core.model import TopicPartition, TransactionDescription, TxnState
    from txnwatch.metrics.registry import build_registry

    parts = tuple(partition(tp=TopicPartition("orders", p), hwm=100, lso=100) for p in range(2))
    groups = tuple(GroupSnapshot(f"g{i}", "Empty", "consumer", {TopicPartition("orders", 0): 100 - i})
                   for i in range(5))  # g4 lags most
    txns = {f"t{i}": TransactionDescription(f"t{i}", 1, TxnState.ONGOING, i, 0, 60_000, 1_000 + i,
                                            frozenset()) for i in range(53)}
    snap = replace(snapshot(partitions=parts, groups=groups), groups_filtered=4, transactions=txns)
    _, findings = detect.evaluate(detect.INITIAL, snap, 0, detect.DetectionSettings(max_groups=2))
    state = LatestState(["c"])
    state.publish(ClusterView(name="c", up=True, snapshot=snap, findings=findings))
    r = build_registry(state, lambda: True)
    lagging = {s.labels["consumergroup"] for m in r.collect() if m.name == "kafka_consumergroup_lag" for s in m.samples}
    assert lagging == {"g4", "g3"}
    omitted = {(k, why): r.get_sample_value("txnwatch_cardinality_omitted", {"cluster": "c", "kind": k, "reason": why})
               for k, why in (("consumer_group", "cap"), ("group_partition", "cap"), ("consumer_group", "filter"),
                              ("transactional_id", "cap"))}
    assert omitted == {("consumer_group", "cap"): 3, ("group_partition", "cap"): 6, ("consumer_group", "filter"): 4,
                       ("transactional_id", "cap"): 3}


def test_record_lag_is_its_own_series_summed_per_topic_only_when_every_partition_is_counted() -> None:
    groups = (GroupSnapshot("g", "Stable", "consumer", {TP: 80, TP1: 40}),)
    snap = snapshot(partitions=(partition(hwm=100, lso=90), partition(tp=TP1, hwm=50, lso=50)), groups=groups)
    labels = {"cluster": "c", "consumergroup": "g", "topic": "orders"}

    def registry(counted: dict[tuple[TopicPartition, int], int]) -> CollectorRegistry:
        _, findings = detect.evaluate(detect.INITIAL, replace(snap, committed_records=counted), 0)
        state = LatestState(["c"])
        state.publish(ClusterView(name="c", up=True, snapshot=snap, findings=findings))
        r = CollectorRegistry(auto_describe=False)
        r.register(LagCollector(state, LagMetricOptions()))
        return r

    # 10 offsets behind on partition 0 are 4 records (markers, aborts); 10 on partition 1 are 5.
    both = registry({(TP, 80): 4, (TP1, 40): 5})
    assert both.get_sample_value("txnwatch_consumergroup_lag_records", {**labels, "partition": "0"}) == 4
    assert both.get_sample_value("txnwatch_consumergroup_lag_lso", {**labels, "partition": "0"}) == 10
    assert both.get_sample_value("txnwatch_consumergroup_topic_lag_records", labels) == 9
    one = registry({(TP, 80): 4})  # partition 1 not counted yet: no per-topic sum that would look like a drop
    assert one.get_sample_value("txnwatch_consumergroup_lag_records", {**labels, "partition": "1"}) is None
    assert one.get_sample_value("txnwatch_consumergroup_topic_lag_records", labels) is None
    assert both.get_sample_value("kafka_consumergroup_lag", {**labels, "partition": "0"}) == 20  # unchanged
