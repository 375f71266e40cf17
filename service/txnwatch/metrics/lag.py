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

import threading
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import groupby
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Literal

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from txnwatch.core.findings import ExporterLag, GroupLag
from txnwatch.core.model import TopicPartition
from txnwatch.core.views import ClusterView, LatestState
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


#: One family's share of a group: its label tuples and values, appended to the family as they are.
Segment = tuple[list[tuple[str, ...]], array]


@dataclass(frozen=True, slots=True)
class _GroupSegments:
    """One group's rows of every group family, built from ``rows`` (its GroupLag or ExporterLag run)."""

    rows: tuple[object, ...]
    by_family: tuple[Segment, ...]


def _segments(count: int) -> tuple[Segment, ...]:
    return tuple(([], array("d")) for _ in range(count))


def _add(segment: Segment, labels: tuple[str, ...], value: float) -> None:
    segment[0].append(labels)
    segment[1].append(value)


def _shared(segments: tuple[Segment, ...]) -> tuple[Segment, ...]:
    """Segments whose label lists are equal share one list: a group's families mostly have a value on every row,
    and the memo keeps these lists between renders (memory, not speed)."""
    longest = max(segments, key=lambda seg: len(seg[0]))[0] if segments else []
    return tuple((longest, values) if rows is not longest and rows == longest else (rows, values)
                 for rows, values in segments)


def _exporter_segments(ex: _Exporter, cluster: str, rows: tuple[ExporterLag, ...],
                       by_partition: bool) -> tuple[Segment, ...]:
    """committed, lag, committed_sum, lag_sum for one group's exporter rows."""
    committed, lag, committed_sum, lag_sum = out = _segments(4)
    for row in rows if by_partition else ():
        labels = ex.values(cluster, (row.group_id, row.tp.topic, int_label(row.tp.partition)))
        _add(committed, labels, row.committed)
        if row.lag is not None:
            _add(lag, labels, row.lag)
    for total in exporter_sums(list(rows)):
        labels = ex.values(cluster, (total.group_id, total.topic))
        _add(committed_sum, labels, total.committed_sum)
        _add(lag_sum, labels, total.lag_sum)
    return (*_shared(out[:2]), *out[2:])


def _lag_segments(cluster: str, rows: tuple[GroupLag, ...], by_partition: bool) -> tuple[Segment, ...]:
    """lag_unknown, lag_lso, lag_hwm, lag_seconds, last_commit, lag_records per partition, then the five per-topic
    families (topics in order), for one group's rows."""
    out = _segments(11)
    lag_unknown, lag_lso, lag_hwm, lag_seconds, last_commit, lag_records = out[:6]
    topic_lso, topic_hwm, topic_records, topic_seconds, topic_commit = out[6:]
    per_topic: dict[tuple[str, str], list[tuple[int | None, int | None, float | None, int | None, int | None]]] = (
        defaultdict(list))
    for g in rows:
        labels = (cluster, g.group_id, g.tp.topic, int_label(g.tp.partition))  # shared by the four families
        commit_s = None if g.last_commit_ms is None else g.last_commit_ms / 1000
        per_topic[(g.group_id, g.tp.topic)].append((g.lag_lso, g.lag_hwm, g.lag_seconds, g.last_commit_ms,
                                                     g.lag_records))
        if not by_partition:
            continue
        if g.lag_seconds_unknown is not None:
            _add(lag_unknown, (*labels, g.lag_seconds_unknown.reason.value), 1)
        for family, value in ((lag_lso, g.lag_lso), (lag_hwm, g.lag_hwm), (lag_seconds, g.lag_seconds),
                              (last_commit, commit_s), (lag_records, g.lag_records)):
            if value is not None:
                _add(family, labels, value)
    for (group_id, topic), values in sorted(per_topic.items()):
        topic_labels = (cluster, group_id, topic)
        lsos, hwms, seconds, commits, counts = zip(*values, strict=True)
        if None not in lsos:
            _add(topic_lso, topic_labels, sum(v for v in lsos if v is not None))
        if None not in counts:
            _add(topic_records, topic_labels, sum(v for v in counts if v is not None))
        if None not in hwms:
            _add(topic_hwm, topic_labels, sum(v for v in hwms if v is not None))
        if None not in seconds:
            _add(topic_seconds, topic_labels, max(v for v in seconds if v is not None))
        known = [v for v in commits if v is not None]
        if known:
            _add(topic_commit, topic_labels, max(known) / 1000)
    return (out[0], *_shared(out[1:6]), *out[6:])


def _runs(rows: Sequence[GroupLag] | Sequence[ExporterLag]) -> list[tuple[str, tuple[Any, ...]]] | None:
    """The rows cut into one run per group, in their order; None if a group's rows are not all together."""
    runs = [(group_id, tuple(run)) for group_id, run in groupby(rows, key=_GROUP_ID)]
    return runs if len({group_id for group_id, _ in runs}) == len(runs) else None


_GROUP_ID = attrgetter("group_id")


class LagFamilies:
    """Builds the lag families, reusing each group's rows while its findings rows are equal (issue 25).

    The render ran :func:`lag_families` on all 12,000 group partitions of the peers lab at every render,
    ~0.3 CPU-s a minute, though a poll changes the rows of a few groups.  A group's series are a function of
    its GroupLag rows (and ExporterLag rows) alone, given the cluster's name and the options: so each group's
    label tuples and values are kept with the rows they came from, and reused while the new rows compare
    equal (the poll's lag memo hands on the very same row objects for a group that did not change, so the
    compare is mostly identity).  Families are then assembled from the groups' pieces in the order the full
    build uses; the series are the same, value for value (tests/unit/test_lag_families.py).  A view whose
    rows do not come grouped (never from the detector) is built in full."""

    def __init__(self, options: LagMetricOptions) -> None:
        self._options = options
        self._ex = _Exporter(options)
        self._lock = threading.Lock()  # one build at a time: the exposition thread, an on-demand scrape
        self._memo: dict[tuple[str, str], dict[str, _GroupSegments]] = {}  # (cluster, kind) -> group -> pieces
        self._partition_labels: dict[str, dict[TopicPartition, tuple[str, ...]]] = {}  # a partition's label values

    def families(self, views: Sequence[ClusterView]) -> list[Metric]:
        with self._lock:
            return self._families(views)

    def _reuse(self, key: tuple[str, str], runs: list[tuple[str, tuple[Any, ...]]], memo: dict[tuple[str, str],
               dict[str, _GroupSegments]], build: Callable[[tuple[Any, ...]], tuple[Segment, ...]],
               ) -> dict[str, _GroupSegments]:
        before = self._memo.get(key, {})
        now: dict[str, _GroupSegments] = {}
        for group_id, rows in runs:
            kept = before.get(group_id)
            now[group_id] = kept if kept is not None and kept.rows == rows else _GroupSegments(rows, build(rows))
        memo[key] = now
        return now

    def _families(self, views: Sequence[ClusterView]) -> list[Metric]:
        options, ex = self._options, self._ex
        by_partition = options.granularity == "partition"
        fam = _new_families(ex)
        memo: dict[tuple[str, str], dict[str, _GroupSegments]] = {}
        partition_labels: dict[str, dict[TopicPartition, tuple[str, ...]]] = {}
        for view in views:
            name = view.name
            if view.snapshot is not None:  # per partition, not per group partition: kept under both granularities
                known = self._partition_labels.get(name, {})
                kept = partition_labels[name] = {}
                # Appended directly, not through add_metric (2 x 2,000 rows a render on the lab): the
                # label values come from the exporter that made the families' label names.
                hwm_rows, hwm_values = fam.hwm.rows, fam.hwm.values
                start_rows, start_values = fam.log_start.rows, fam.log_start.values
                for p in view.snapshot.partitions.values():
                    tp = p.tp
                    labels = known.get(tp)
                    if labels is None:
                        labels = ex.values(name, (tp.topic, int_label(tp.partition)))
                    kept[tp] = labels
                    if p.high_watermark is not None:
                        hwm_rows.append(labels)
                        hwm_values.append(p.high_watermark)
                    if p.log_start_offset is not None:
                        start_rows.append(labels)
                        start_values.append(p.log_start_offset)
            findings = view.findings
            if findings is None:
                continue
            exporter_runs, lag_runs = _runs(findings.exporter_lags), _runs(findings.lags)
            if exporter_runs is None or lag_runs is None:
                _add_view_in_full(fam, ex, name, findings.exporter_lags, findings.lags, by_partition)
                continue
            exported = self._reuse((name, "exporter"), exporter_runs, memo,
                                   partial(_exporter_segments, ex, name, by_partition=by_partition))
            lagged = self._reuse((name, "lag"), lag_runs, memo, partial(_lag_segments, name, by_partition=by_partition))
            ordered = sorted(exported)
            _extend((fam.committed, fam.lag), (exported[g].by_family[:2] for g, _ in exporter_runs))
            _extend((fam.committed_sum, fam.lag_sum), (exported[g].by_family[2:] for g in ordered))
            _extend(fam.per_partition, (lagged[g].by_family[:6] for g, _ in lag_runs))
            _extend(fam.per_topic, (lagged[g].by_family[6:] for g in sorted(lagged)))
        self._memo = memo  # clusters and groups that went are dropped with the previous memo
        self._partition_labels = partition_labels
        return fam.ordered()


def _extend(families: Sequence[LeanGauge], pieces: Iterable[Sequence[Segment]]) -> None:
    for segments in pieces:
        for family, (rows, values) in zip(families, segments, strict=True):
            if rows:
                family.rows.extend(rows)
                family.values.extend(values)


def _add_view_in_full(fam: _Families, ex: _Exporter, name: str, exporter_lags: Sequence[ExporterLag],
                      lags: Sequence[GroupLag], by_partition: bool) -> None:
    """A view's group families without reuse: the whole view as one run of each kind."""
    exported = _exporter_segments(ex, name, tuple(exporter_lags), by_partition)
    _extend((fam.committed, fam.lag, fam.committed_sum, fam.lag_sum), (exported,))
    lagged = _lag_segments(name, tuple(lags), by_partition)
    _extend(fam.per_partition, (lagged[:6],))
    _extend(fam.per_topic, (lagged[6:],))


def lag_families(views: Sequence[ClusterView], options: LagMetricOptions) -> Iterator[Metric]:
    """Every offset and lag family, from the latest snapshot and findings of each cluster (built afresh)."""
    yield from LagFamilies(options).families(views)


class LagCollector(Collector):
    """Offsets and consumer lag: kafka_exporter's families and txnwatch's own."""

    def __init__(self, state: LatestState, options: LagMetricOptions) -> None:
        self._state = state
        self._families = LagFamilies(options)  # keeps each group's series while its rows stay equal

    def collect(self) -> Iterator[Metric]:
        yield from self._families.families(self._state.views())


@dataclass(frozen=True)
class _Families:
    hwm: LeanGauge
    log_start: LeanGauge
    committed: LeanGauge
    lag: LeanGauge
    committed_sum: LeanGauge
    lag_sum: LeanGauge
    #: lag_unknown, lag_lso, lag_hwm, lag_seconds, last_commit, lag_records (the segments' order)
    per_partition: tuple[LeanGauge, ...]
    #: topic_lso, topic_hwm, topic_records, topic_seconds, topic_commit (the segments' order)
    per_topic: tuple[LeanGauge, ...]

    def ordered(self) -> list[Metric]:
        """The exposition's order of the families."""
        lag_unknown, lag_lso, lag_hwm, lag_seconds, last_commit, lag_records = self.per_partition
        return [self.hwm, self.log_start, self.committed, self.lag, self.committed_sum, self.lag_sum, lag_lso,
                lag_hwm, lag_records, lag_seconds, lag_unknown, last_commit, *self.per_topic]


def _new_families(ex: _Exporter) -> _Families:
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
    return _Families(hwm, log_start, committed, lag, committed_sum, lag_sum,
                     (lag_unknown, lag_lso, lag_hwm, lag_seconds, last_commit, lag_records),
                     (topic_lso, topic_hwm, topic_records, topic_seconds, topic_commit))
