"""The console's consumer group rows: offset lag and record lag from the stored samples.

Offset lag (against the LSO and the high watermark) and, since migration 0009, lag in records (what a
read_committed consumer still receives: no commit/abort markers, no aborted transaction's records, counted by the
collector's bounded read, ``kafka/record_count.py``) are what the lag samples store. A sample stored without a
record count falls back, as the API's ``lag_records`` does, to the collector's latest count for the same
committed offset. A group's total shows only when every partition's is known, so a half-counted group never shows
a low number.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from txnwatch.core.views import LatestState
from txnwatch.store import queries

#: (group id, topic, partition, committed offset) -> records a read_committed consumer still reads.
RecordLags = dict[tuple[str, str, int, int], int]
#: Groups shown on the list page (the API pages through more).
LIST_LIMIT = 500


@dataclass(frozen=True, slots=True)
class GroupRow:
    cluster: str
    group_id: str
    topics: tuple[str, ...]
    partitions: int
    sampled_at: datetime
    lag_lso: int | None
    lag_hwm: int | None
    #: Summed over the group's partitions; None unless every partition was counted at the latest poll.
    lag_records: int | None
    max_lag_seconds: float | None


@dataclass(frozen=True, slots=True)
class PartitionRow:
    topic: str
    partition: int
    committed_offset: int
    lag_lso: int | None
    lag_hwm: int | None
    lag_records: int | None
    lag_seconds: float | None
    sampled_at: datetime


def record_lags(state: LatestState, cluster: str) -> RecordLags:
    """Every counted partition of the cluster's latest poll."""
    view = state.get(cluster)
    findings = view.findings if view is not None else None
    if findings is None:
        return {}
    return {(g.group_id, g.tp.topic, g.tp.partition, g.committed): g.lag_records for g in findings.lags
            if g.lag_records is not None}


def _group_total(counted: RecordLags, group_id: str, partitions: int) -> int | None:
    """The group's record lag when the poll counted as many of its partitions as the sample holds."""
    mine = [n for (gid, _, _, _), n in counted.items() if gid == group_id]
    return sum(mine) if mine and len(mine) == partitions else None


def groups(session: Session, state: LatestState, clusters: list[str]) -> list[GroupRow]:
    """Each group of the clusters' latest lag samples, by cluster and group id."""
    counted = {name: record_lags(state, name) for name in clusters}
    stored = queries.group_record_lags(session, clusters)
    rows = []
    for g in queries.list_groups(session, clusters, after=None, limit=LIST_LIMIT):
        records = stored.get((g.cluster_id, g.group_id))
        if records is None:
            records = _group_total(counted.get(g.cluster, {}), g.group_id, g.partitions)
        rows.append(GroupRow(g.cluster, g.group_id, g.topics, g.partitions, g.sampled_at, g.lag_lso, g.lag_hwm,
                             records, g.max_lag_seconds))
    return rows


def partitions(session: Session, state: LatestState, cluster_id: int, cluster: str,
               group_id: str) -> list[PartitionRow]:
    """The group's latest sample, partition by partition, with the record lag counted at that committed offset."""
    counted = record_lags(state, cluster)
    return [PartitionRow(r.topic, r.partition, r.committed_offset, r.lag_lso, r.lag_hwm,
                         r.lag_records if r.lag_records is not None
                         else counted.get((group_id, r.topic, r.partition, r.committed_offset)), r.lag_seconds,
                         r.sampled_at)
            for r in queries.group_partitions(session, cluster_id, group_id)]


def total(rows: list[PartitionRow]) -> int | None:
    """The group's record lag: None unless every partition's is known."""
    values = [r.lag_records for r in rows]
    return None if not values or None in values else sum(v for v in values if v is not None)
