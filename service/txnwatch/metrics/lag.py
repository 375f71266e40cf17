"""Consumer-lag and offset families: kafka_exporter's names exactly, txnwatch's own beside them.

The ``kafka_*`` families reproduce kafka_exporter series by series (see
:mod:`txnwatch.detect.exporter` for its formula), so alerts and dashboards written for it
keep working when txnwatch runs instead of or beside it.  Their label names can be made to
match a kafka_exporter deployment: ``metrics.cluster_label`` names (or, empty, drops) the
label that carries the cluster name, and a cluster's ``metric_labels`` adds constant
labels the way kafka_exporter's ``--kafka.labels`` does.

The lag that is right for read_committed groups (vs the LSO), the same in records (markers and
aborted records left out), the marker-corrected lag vs
the high watermark, the time lag and the last-commit time have ``txnwatch_`` names and
always a ``cluster`` label.

``granularity`` (KMinion's option): ``partition`` exports per-partition and per-topic
group series; ``topic`` only the per-topic ones, which cuts the series count by the
partition count on big clusters.  Per-topic series are therefore always there, and the
dashboards are built on them.  A per-topic sum is exported only when every partition of
the topic had a value, so a missing answer never shows as a drop in lag.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from prometheus_client.core import Metric

from txnwatch.core.views import ClusterView
from txnwatch.detect.exporter import exporter_sums
from txnwatch.metrics.render import LeanGauge, int_label

if TYPE_CHECKING:
    from txnwatch.core.config import Settings

Granularity = Literal["partition", "topic"]


@dataclass(frozen=True)
class LagMetricOptions:
    """How the lag families are labelled and cut; built once from ``Settings.metrics``."""

    granularity: Granularity = "partition"
    #: Label carrying the cluster name on the kafka_* families ("" drops it, as a single-cluster kafka_exporter has none).
    cluster_label: str = "cluster"
    #: Constant labels per cluster on the kafka_* families (kafka_exporter's --kafka.labels).
    cluster_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> LagMetricOptions:
        return cls(granularity=settings.metrics.granularity, cluster_label=settings.metrics.cluster_label,
                   cluster_labels={c.name: dict(c.metric_labels) for c in settings.clusters})


class _Exporter:
    """kafka_* families with kafka_exporter's labels, plus the configured cluster and constant labels."""

    def __init__(self, options: LagMetricOptions) -> None:
        self._options = options
        self._extra = sorted({key for labels in options.cluster_labels.values() for key in labels})
        self._head = [options.cluster_label] if options.cluster_label else []

    def gauge(self, name: str, doc: str, labels: list[str]) -> LeanGauge:
        return LeanGauge(name, doc, [*self._head, *labels, *self._extra])

    def values(self, cluster: str, values: Sequence[str]) -> tuple[str, ...]:
        constant = self._options.cluster_labels.get(cluster, {})
        return (*([cluster] if self._head else []), *values, *(constant.get(k, "") for k in self._extra))


def lag_families(views: Sequence[ClusterView], options: LagMetricOptions) -> Iterator[Metric]:
    """Every offset and lag family, from the latest snapshot and findings of each cluster."""
    ex = _Exporter(options)
    by_partition = options.granularity == "partition"
    hwm = ex.gauge("kafka_topic_partition_current_offset", "High watermark (kafka_exporter's name).",
                   ["topic", "partition"])
    log_start = ex.gauge("kafka_topic_partition_oldest_offset", "Log start offset (kafka_exporter's name).",
                         ["topic", "partition"])
    committed = ex.gauge("kafka_consumergroup_current_offset",
                         "Committed offset, -1 for none (kafka_exporter's name and meaning).",
                         ["consumergroup", "topic", "partition"])
    lag = ex.gauge("kafka_consumergroup_lag", "High watermark minus committed offset, -1 when nothing is committed "
                   "(kafka_exporter's name and formula: no marker correction).", ["consumergroup", "topic", "partition"])
    committed_sum = ex.gauge("kafka_consumergroup_current_offset_sum",
                             "Sum of the topic's committed offsets, -1s included (kafka_exporter's).",
                             ["consumergroup", "topic"])
    lag_sum = ex.gauge("kafka_consumergroup_lag_sum", "Sum of the topic's kafka_consumergroup_lag, -1s left out "
                       "(kafka_exporter's).", ["consumergroup", "topic"])
    group_partition = ["cluster", "consumergroup", "topic", "partition"]
    group_topic = ["cluster", "consumergroup", "topic"]
    lag_lso = LeanGauge("txnwatch_consumergroup_lag_lso", "LSO minus committed offset: what read_committed "
                        "consumers can still read; a trailing control marker counts as 0.", group_partition)
    lag_hwm = LeanGauge("txnwatch_consumergroup_lag_hwm", "High watermark minus committed offset, never "
                        "negative; a trailing control marker counts as 0.", group_partition)
    lag_records = LeanGauge("txnwatch_consumergroup_lag_records", "Records a read_committed consumer still reads "
                            "before the LSO: control markers and aborted transactions' records left out (counted "
                            "by reading the partition; absent until the count reaches the LSO).", group_partition)
    lag_seconds = LeanGauge("txnwatch_consumergroup_lag_seconds", "Age of the first record the group has not "
                            "consumed (0 when caught up).", group_partition)
    lag_unknown = LeanGauge("txnwatch_consumergroup_lag_seconds_unknown", "1 where the time lag is unknown "
                            "because the first unconsumed record cannot be read (reason record_over_budget: past "
                            "the decompression budget; record_unreadable: a damaged batch); "
                            "txnwatch_consumergroup_lag_seconds is absent there.", [*group_partition, "reason"])
    last_commit = LeanGauge("txnwatch_consumergroup_last_commit_timestamp_seconds", "Unix time of the poll "
                            "that first saw the committed offset at its current value.", group_partition)
    topic_lso = LeanGauge("txnwatch_consumergroup_topic_lag_lso", "txnwatch_consumergroup_lag_lso summed over "
                          "the topic's partitions.", group_topic)
    topic_hwm = LeanGauge("txnwatch_consumergroup_topic_lag_hwm", "txnwatch_consumergroup_lag_hwm summed over "
                          "the topic's partitions.", group_topic)
    topic_records = LeanGauge("txnwatch_consumergroup_topic_lag_records", "txnwatch_consumergroup_lag_records "
                              "summed over the topic's partitions.", group_topic)
    topic_seconds = LeanGauge("txnwatch_consumergroup_topic_lag_seconds", "Largest "
                              "txnwatch_consumergroup_lag_seconds of the topic's partitions.", group_topic)
    topic_commit = LeanGauge("txnwatch_consumergroup_topic_last_commit_timestamp_seconds", "Latest "
                             "txnwatch_consumergroup_last_commit_timestamp_seconds of the topic's partitions.",
                             group_topic)
    for view in views:
        name = view.name
        if view.snapshot is not None:  # per partition, not per group partition: kept under both granularities
            for p in view.snapshot.partitions.values():
                labels = ex.values(name, (p.tp.topic, int_label(p.tp.partition)))
                if p.high_watermark is not None:
                    hwm.add_metric(labels, p.high_watermark)
                if p.log_start_offset is not None:
                    log_start.add_metric(labels, p.log_start_offset)
        findings = view.findings
        if findings is None:
            continue
        rows = list(findings.exporter_lags)
        for row in rows if by_partition else ():
            labels = ex.values(name, (row.group_id, row.tp.topic, int_label(row.tp.partition)))
            committed.add_metric(labels, row.committed)
            if row.lag is not None:
                lag.add_metric(labels, row.lag)
        for total in exporter_sums(rows):
            labels = ex.values(name, (total.group_id, total.topic))
            committed_sum.add_metric(labels, total.committed_sum)
            lag_sum.add_metric(labels, total.lag_sum)
        per_topic: dict[tuple[str, str], list[tuple[int | None, int | None, float | None, int | None, int | None]]] = (
            defaultdict(list))
        for g in findings.lags:
            labels = (name, g.group_id, g.tp.topic, int_label(g.tp.partition))  # shared by the four families
            commit_s = None if g.last_commit_ms is None else g.last_commit_ms / 1000
            per_topic[(g.group_id, g.tp.topic)].append((g.lag_lso, g.lag_hwm, g.lag_seconds, g.last_commit_ms,
                                                         g.lag_records))
            if not by_partition:
                continue
            if g.lag_seconds_unknown is not None:
                lag_unknown.add_metric((*labels, g.lag_seconds_unknown.reason.value), 1)
            for family, value in ((lag_lso, g.lag_lso), (lag_hwm, g.lag_hwm), (lag_seconds, g.lag_seconds),
                                  (last_commit, commit_s), (lag_records, g.lag_records)):
                if value is not None:
                    family.add_metric(labels, value)
        for (group_id, topic), values in sorted(per_topic.items()):
            labels = (name, group_id, topic)
            lsos, hwms, seconds, commits, counts = zip(*values, strict=True)
            if None not in lsos:
                topic_lso.add_metric(labels, sum(v for v in lsos if v is not None))
            if None not in counts:
                topic_records.add_metric(labels, sum(v for v in counts if v is not None))
            if None not in hwms:
                topic_hwm.add_metric(labels, sum(v for v in hwms if v is not None))
            if None not in seconds:
                topic_seconds.add_metric(labels, max(v for v in seconds if v is not None))
            known = [v for v in commits if v is not None]
            if known:
                topic_commit.add_metric(labels, max(known) / 1000)
    yield from (hwm, log_start, committed, lag, committed_sum, lag_sum, lag_lso, lag_hwm, lag_records, lag_seconds,
                lag_unknown, last_commit, topic_lso, topic_hwm, topic_records, topic_seconds, topic_commit)
