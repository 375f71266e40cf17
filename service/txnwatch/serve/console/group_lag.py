"""The console's consumer group rows: offset lag and record lag, as the API answers them.

Offset lag (against the LSO and the high watermark) and lag in records (what a read_committed consumer still
receives: no commit/abort markers, no aborted transaction's records, counted by the collector's bounded read,
``kafka/record_count.py``) come from the collector's latest poll, and from the stored samples where those are
newer (serve/api/current_lag.py, the API's source too); the group page's chart is the stored history. A stored
sample without a record count falls back, as the API's ``lag_records`` does, to the collector's latest count for
the same committed offset. A group's total shows only when every partition's is known, so a half-counted group
never shows a low number.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from txnwatch.core.views import LatestState
from txnwatch.serve.api import current_lag
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
    """Each group of the clusters (the latest poll's, or the latest stored sample's), by cluster and group id."""
    listed = current_lag.list_groups(session, state, clusters, after=None, limit=LIST_LIMIT)
    from_store = sorted({g.cluster for g, polled in listed if polled is None})
    counted = {name: record_lags(state, name) for name in from_store}
    stored = queries.group_record_lags(session, from_store) if from_store else {}
    rows = []
    for g, polled in listed:
        if polled is not None:
            records = polled.lag_records
        else:
            records = stored.get((g.cluster_id, g.group_id))
            if records is None:
                records = _group_total(counted.get(g.cluster, {}), g.group_id, g.partitions)
        rows.append(GroupRow(g.cluster, g.group_id, g.topics, g.partitions, g.sampled_at, g.lag_lso, g.lag_hwm,
                             records, g.max_lag_seconds))
    return rows


def partitions(session: Session, state: LatestState, cluster_id: int, cluster: str,
               group_id: str) -> list[PartitionRow]:
    """The group at the latest poll (or its latest stored sample where that is newer), partition by partition,
    with the record lag counted at that committed offset."""
    polled = current_lag.polled_group(session, state, cluster, cluster_id, group_id)
    if polled is not None:
        return [PartitionRow(g.tp.topic, g.tp.partition, g.committed, g.lag_lso, g.lag_hwm, g.lag_records,
                             g.lag_seconds, polled.sampled_at) for g in polled.lags]
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
