"""Consumer lag measured the way read_committed consumers experience it: against the LSO.

Current lag comes from the collector's latest poll, as /metrics and the console show it (serve/api/current_lag.py);
the stored lag samples (every ``lag_sample_interval_seconds``) answer only where they are newer, and keep the
history (the console's group page charts it).
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from txnwatch.core.views import LatestState
from txnwatch.serve.api import current_lag
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
            description="Per group, from the collector's latest poll (the lag /metrics exports, `sampled_at` the "
                        "poll's time; a group is listed from the first poll after its first commit): total lag "
                        "against the LSO (what a read_committed consumer can still read) and against the high "
                        "watermark (what classic lag exporters show). The difference is data held back by open "
                        "transactions, not slow consumers. Where this replica does not poll the cluster, or has "
                        "not polled it since it started, the latest stored lag sample answers (written every "
                        "`lag_sample_interval_seconds`). Ordered by cluster and group id.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_groups(session: ReadSession, clusters: ClusterFilter, state: StateDep, limit: Limit = 100,
                cursor: CursorParam = None) -> Response:
    kind = "groups"
    after = decode_cursor(cursor, kind, (int, str))
    rows = current_lag.list_groups(session, state, clusters.names, after=after, limit=limit)
    items = [from_row(ConsumerGroupSummary, g, topics=list(g.topics)) for g, _ in rows]
    cursor_out = next_cursor(kind, rows, limit, lambda r: (r[0].cluster_id, r[0].group_id))
    return json_response(ConsumerGroupPage, {"items": items, "next_cursor": cursor_out})


@router.get("/{cluster}/{group_id:path}", response_model=ConsumerGroupDetail,
            summary="One consumer group: lag per partition",
            description="The group at the collector's latest poll (as /metrics exports it; `sampled_at` the "
                        "poll's time): committed offset, lag vs LSO, lag vs HWM, lag in records and estimated lag "
                        "in seconds for each partition. A group the latest poll no longer finds (its offsets "
                        "deleted or expired), or one of a cluster this replica does not poll, shows its latest "
                        "stored sample (see `sampled_at`).",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster or group."}})
def get_group(name: PathCluster, group_id: str, session: ReadSession, state: StateDep) -> Response:
    cluster = cluster_ref(session, name)
    polled = current_lag.polled_group(session, state, cluster.name, cluster.id, group_id)
    if polled is not None:
        return _polled_detail(polled)
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


def _polled_detail(group: current_lag.PolledGroup) -> Response:
    partition_lags = [dict(topic=g.tp.topic, partition=g.tp.partition, committed_offset=g.committed,
                           lag_lso=g.lag_lso, lag_hwm=g.lag_hwm, lag_seconds=g.lag_seconds,
                           lag_seconds_unknown=None if g.lag_seconds_unknown is None
                           else str(g.lag_seconds_unknown)[:500], lag_records=g.lag_records) for g in group.lags]
    summary = group.summary()
    return json_response(ConsumerGroupDetail, dict(
        from_row(ConsumerGroupSummary, summary, topics=list(summary.topics)), lag_records=group.lag_records,
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
