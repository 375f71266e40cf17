"""Consumer lag measured the way read_committed consumers experience it: against the LSO."""

from __future__ import annotations

from fastapi import APIRouter, Response

from txnwatch.core.views import LatestState
from txnwatch.serve.api.convert import from_row
from txnwatch.serve.api.deps import ClusterFilter, PathCluster, ReadSession, StateDep, cluster_ref, not_found
from txnwatch.serve.api.params import CursorParam, Limit, decode_cursor, json_response, next_cursor
from txnwatch.serve.api.schemas import (
    ConsumerGroupDetail,
    ConsumerGroupPage,
    ConsumerGroupSummary,
    ErrorOut,
    GroupPartitionLag,
)
from txnwatch.store import queries

router = APIRouter(prefix="/consumer-groups", tags=["consumer groups"])


@router.get("", response_model=ConsumerGroupPage, summary="Consumer groups with lag vs LSO and vs HWM",
            description="Per group, from the latest poll: total lag against the LSO (what a read_committed "
                        "consumer can still read) and against the high watermark (what classic lag exporters "
                        "show). The difference is data held back by open transactions, not slow consumers. "
                        "Ordered by cluster and group id.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_groups(session: ReadSession, clusters: ClusterFilter, limit: Limit = 100,
                cursor: CursorParam = None) -> Response:
    kind = "groups"
    after = decode_cursor(cursor, kind, (int, str))
    groups = queries.list_groups(session, clusters.names, after=after, limit=limit)
    items = [from_row(ConsumerGroupSummary, g, topics=list(g.topics)) for g in groups]
    cursor_out = next_cursor(kind, groups, limit, lambda g: (g.cluster_id, g.group_id))
    return json_response(ConsumerGroupPage, {"items": items, "next_cursor": cursor_out})


@router.get("/{cluster}/{group_id:path}", response_model=ConsumerGroupDetail,
            summary="One consumer group: lag per partition",
            description="The group's latest sample: committed offset, lag vs LSO, lag vs HWM and estimated lag "
                        "in seconds for each partition. A group that stopped committing shows where it stopped "
                        "(see `sampled_at`).",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster or group."}})
def get_group(name: PathCluster, group_id: str, session: ReadSession, state: StateDep) -> Response:
    cluster = cluster_ref(session, name)
    rows = []
    if cluster.id is not None and "\x00" not in group_id:
        rows = queries.group_partitions(session, cluster.id, group_id)
    if not rows:
        raise not_found(f"consumer group {group_id!r} has no committed offsets recorded on cluster {cluster.name!r}")
    lso = [r.lag_lso for r in rows if r.lag_lso is not None]
    hwm = [r.lag_hwm for r in rows if r.lag_hwm is not None]
    secs = [r.lag_seconds for r in rows if r.lag_seconds is not None]
    counted = _record_lags(state, cluster.name, group_id)
    # The sample's own record lag (stored since migration 0009), else the collector's latest count of it.
    partition_lags = [from_row(GroupPartitionLag, r, lag_records=r.lag_records if r.lag_records is not None
                               else counted.get((r.topic, r.partition, r.committed_offset))) for r in rows]
    records = [p["lag_records"] for p in partition_lags]
    return json_response(ConsumerGroupDetail, dict(
        cluster=cluster.name, group_id=group_id, sampled_at=rows[0].sampled_at, partitions=len(rows),
        topics=sorted({r.topic for r in rows}), lag_lso=sum(lso) if lso else None, lag_hwm=sum(hwm) if hwm else None,
        max_lag_seconds=max(secs, default=None),
        lag_seconds_unknown=sum(1 for r in rows if r.lag_seconds_unknown is not None),
        lag_records=None if None in records else sum(r for r in records if r is not None),
        partition_lags=partition_lags))


def _record_lags(state: LatestState, cluster: str, group_id: str) -> dict[tuple[str, int, int], int]:
    """(topic, partition, committed offset) -> record lag, from the collector's latest poll (for samples stored
    without one)."""
    view = state.get(cluster)
    findings = view.findings if view is not None else None
    if findings is None:
        return {}
    return {(g.tp.topic, g.tp.partition, g.committed): g.lag_records for g in findings.lags
            if g.group_id == group_id and g.lag_records is not None}
