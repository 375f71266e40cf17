"""kafka_exporter's consumer-group lag, series by series, so its alerts and dashboards carry over unchanged.

kafka_exporter (danielqsj/kafka_exporter, ``kafka_exporter.go``) computes, per group and
topic it reports:

* a topic is reported for a group only if at least one of its partitions has a committed
  offset (OffsetFetch answers -1 for "none"); with its default ``--offset.show-all`` every
  partition of such a topic is then reported, the uncommitted ones too;
* ``kafka_consumergroup_current_offset`` is the committed offset as is, -1 included;
* ``kafka_consumergroup_lag`` is ``newest offset - committed``: the newest offset is
  ListOffsets(latest) under read_uncommitted, i.e. the high watermark, with no clamping
  and no control-marker correction; it is -1 when nothing is committed, and absent when
  the high watermark could not be read;
* ``kafka_consumergroup_current_offset_sum`` adds the committed offsets of the topic's
  partitions, the -1s included; ``kafka_consumergroup_lag_sum`` adds the lags that are not -1.

txnwatch reports the same over the topics it watches (``topics_include``/``topics_exclude``
play the role of kafka_exporter's ``--topic.filter``/``--topic.exclude``).  The lag that is
right for read_committed groups, and the marker-corrected one, have ``txnwatch_`` names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from txnwatch.core.findings import ExporterLag, ExporterTopicSum
from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, TopicPartition

NO_OFFSET = -1


def partitions_by_topic(snapshot: ClusterSnapshot) -> dict[str, list[TopicPartition]]:
    """The watched partitions of each topic, sorted."""
    partitions_of: dict[str, list[TopicPartition]] = defaultdict(list)
    for tp in snapshot.partitions:
        partitions_of[tp.topic].append(tp)
    return {topic: sorted(tps) for topic, tps in partitions_of.items()}


def consumed_topics(group: GroupSnapshot, partitions_of: Mapping[str, list[TopicPartition]]) -> list[str]:
    """The watched topics the group has committed on, which kafka_exporter reports for it."""
    return sorted({tp.topic for tp, offset in group.offsets.items()
                   if offset is not None and offset != NO_OFFSET and tp.topic in partitions_of})


def group_exporter_rows(snapshot: ClusterSnapshot, group: GroupSnapshot,
                        partitions_of: Mapping[str, list[TopicPartition]]) -> list[ExporterLag]:
    """One group's rows of :func:`exporter_lags`."""
    rows: list[ExporterLag] = []
    for topic in consumed_topics(group, partitions_of):
        for tp in partitions_of[topic]:
            committed = group.offsets.get(tp)
            committed = NO_OFFSET if committed is None else committed
            hwm = snapshot.partitions[tp].high_watermark
            lag = None if hwm is None else NO_OFFSET if committed == NO_OFFSET else hwm - committed
            rows.append(ExporterLag(group.group_id, tp, committed, lag))
    return rows


def exporter_lags(snapshot: ClusterSnapshot) -> list[ExporterLag]:
    """Every per-partition series kafka_exporter would export for the groups and watched topics of ``snapshot``."""
    partitions_of = partitions_by_topic(snapshot)
    rows: list[ExporterLag] = []
    for group in sorted(snapshot.groups.values(), key=lambda g: g.group_id):
        rows.extend(group_exporter_rows(snapshot, group, partitions_of))
    return rows


def exporter_sums(rows: list[ExporterLag]) -> list[ExporterTopicSum]:
    """The ``_sum`` series: committed offsets summed with their -1s, lags without them (as kafka_exporter does)."""
    committed: dict[tuple[str, str], int] = defaultdict(int)
    lag: dict[tuple[str, str], int] = defaultdict(int)
    for row in rows:
        key = (row.group_id, row.tp.topic)
        committed[key] += row.committed
        lag[key] += 0 if row.lag is None or row.committed == NO_OFFSET else row.lag
    return [ExporterTopicSum(g, t, committed[(g, t)], lag[(g, t)]) for g, t in sorted(committed)]
