"""The lag families reuse each group's series while its rows are equal (issue 25), and never serve a stale value.

A collector that lives across polls (as the daemon's does) must print exactly what a collector built afresh
prints, at every poll of a random sequence in which groups' offsets move, high watermarks move, groups come
and go; and a value that changed must show at once.
"""

from __future__ import annotations

import random
from dataclasses import replace

from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from tests.unit.detect.builders import partition, snapshot
from txnwatch import detect
from txnwatch.core.findings import ExporterLag
from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, TopicPartition
from txnwatch.core.views import ClusterView, LatestState
from txnwatch.metrics.lag import Granularity, LagCollector, LagFamilies, LagMetricOptions
from txnwatch.metrics.render import LeanGauge


def _by_name(families: LagFamilies, views: list[ClusterView]) -> dict[str, LeanGauge]:
    out = {}
    for family in families.families(views):
        assert isinstance(family, LeanGauge)
        out[family.name] = family
    return out


TPS = [TopicPartition(f"t{t}", p) for t in range(3) for p in range(4)]


def _text(state: LatestState, collector: LagCollector) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


def _snap(rng: random.Random, hwms: dict[TopicPartition, int], groups: dict[str, dict[TopicPartition, int]],
          ) -> ClusterSnapshot:
    return snapshot(partitions=tuple(partition(tp=tp, hwm=h, lso=h) for tp, h in hwms.items()),
                    groups=tuple(GroupSnapshot(g, "Stable", "consumer", dict(o)) for g, o in groups.items()))


def _run(seed: int, granularity: Granularity) -> int:
    rng = random.Random(seed)
    options = LagMetricOptions(granularity=granularity, cluster_labels={"c": {"env": "lab"}})
    state = LatestState(["c"])
    kept = LagCollector(state, options)
    hwms = dict.fromkeys(TPS, 100)
    groups = {f"g{n}": dict.fromkeys(rng.sample(TPS, 4), 100) for n in range(8)}
    detector, compared = detect.INITIAL, 0
    for poll in range(25):
        for _ in range(rng.randint(0, 3)):  # a few groups commit (or fall behind)
            offsets = groups[rng.choice(sorted(groups))]
            tp = rng.choice(sorted(offsets, key=str))
            offsets[tp] = rng.randint(max(0, hwms[tp] - 30), hwms[tp])
        if rng.random() < 0.4:  # a partition is written to
            tp = rng.choice(TPS)
            hwms[tp] += rng.randint(1, 20)
        if rng.random() < 0.15 and len(groups) > 2:  # a group goes
            del groups[rng.choice(sorted(groups))]
        if rng.random() < 0.15:  # a group comes
            groups[f"new{poll}"] = {tp: hwms[tp] for tp in rng.sample(TPS, 3)}
        detector, findings = detect.evaluate(detector, _snap(rng, hwms, groups), poll * 15_000)
        state.publish(ClusterView(name="c", up=True, snapshot=_snap(rng, hwms, groups), findings=findings))
        assert _text(state, kept) == _text(state, LagCollector(state, options)), (seed, poll)
        compared += 1
    return compared


def test_a_collector_kept_across_polls_prints_what_a_fresh_one_prints() -> None:
    for seed in range(6):
        assert _run(seed, "partition") == 25
        assert _run(seed, "topic") == 25


def test_a_group_whose_offset_moved_shows_its_new_lag_at_once() -> None:
    state = LatestState(["c"])
    collector = LagCollector(state, LagMetricOptions())
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    tp = TPS[0]
    labels = {"cluster": "c", "consumergroup": "g", "topic": tp.topic, "partition": str(tp.partition)}
    detector = detect.INITIAL
    for at, (hwm, committed) in enumerate([(100, 90), (100, 90), (100, 95), (120, 95), (120, 95)]):
        snap = snapshot(partitions=(partition(tp=tp, hwm=hwm, lso=hwm),),
                        groups=(GroupSnapshot("g", "Stable", "consumer", {tp: committed}),))
        detector, findings = detect.evaluate(detector, snap, at * 15_000)
        state.publish(ClusterView(name="c", up=True, snapshot=snap, findings=findings))
        assert registry.get_sample_value("kafka_consumergroup_lag", labels) == hwm - committed
        assert registry.get_sample_value("kafka_consumergroup_current_offset", labels) == committed
        assert registry.get_sample_value("txnwatch_consumergroup_lag_hwm", labels) == hwm - committed
        assert registry.get_sample_value("txnwatch_consumergroup_topic_lag_hwm",
                                         {k: v for k, v in labels.items() if k != "partition"}) == hwm - committed
        assert registry.get_sample_value("kafka_topic_partition_current_offset",
                                         {"cluster": "c", "topic": tp.topic, "partition": "0"}) == hwm


def test_an_equal_row_is_reused_and_a_changed_one_is_not() -> None:
    """The reuse is by value: an equal row (a new object) keeps the group's series, a changed value does not."""
    families = LagFamilies(LagMetricOptions())
    tp = TPS[0]
    snap = snapshot(partitions=(partition(tp=tp, hwm=100, lso=100),),
                    groups=(GroupSnapshot("g", "Stable", "consumer", {tp: 60}),))
    _, findings = detect.evaluate(detect.INITIAL, snap, 0)
    view = ClusterView(name="c", up=True, snapshot=snap, findings=findings)
    first = _by_name(families, [view])
    copied = replace(findings, exporter_lags=tuple(replace(r) for r in findings.exporter_lags))
    again = _by_name(families, [replace(view, findings=copied)])
    assert again["kafka_consumergroup_lag"].rows[0] is first["kafka_consumergroup_lag"].rows[0]  # reused
    moved = replace(findings, exporter_lags=(ExporterLag("g", tp, 70, 30),))
    third = _by_name(families, [replace(view, findings=moved)])
    assert list(third["kafka_consumergroup_lag"].values) == [30.0]
    assert list(third["kafka_consumergroup_current_offset"].values) == [70.0]
    assert list(third["kafka_consumergroup_lag_sum"].values) == [30.0]


def test_rows_of_a_group_apart_are_built_in_full_and_in_order() -> None:
    """Rows not grouped by group (never from the detector) take the full build: same series, same order."""
    tps = TPS[:2]
    rows = (ExporterLag("a", tps[0], 5, 95), ExporterLag("b", tps[0], 7, 93), ExporterLag("a", tps[1], 9, 91))
    snap = snapshot(partitions=tuple(partition(tp=tp, hwm=100, lso=100) for tp in tps))
    _, findings = detect.evaluate(detect.INITIAL, snap, 0)
    view = ClusterView(name="c", up=True, snapshot=snap, findings=replace(findings, exporter_lags=rows))
    by_name = _by_name(LagFamilies(LagMetricOptions()), [view])
    lag = by_name["kafka_consumergroup_lag"]
    assert [r[1] for r in lag.rows] == ["a", "b", "a"] and list(lag.values) == [95.0, 93.0, 91.0]
    sums = by_name["kafka_consumergroup_lag_sum"]
    assert [r[1] for r in sums.rows] == ["a", "b"] and list(sums.values) == [186.0, 93.0]
