"""LSO stalls: partitions whose last stable offset stopped while producers kept writing."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response

from txnwatch.serve.api.deps import ClusterFilter, ReadSession, RuntimeDep
from txnwatch.serve.api.incidents import IncidentBuilder
from txnwatch.serve.api.params import (
    CursorParam,
    Limit,
    UtcDatetime,
    decode_cursor,
    json_response,
    next_cursor,
    now,
)
from txnwatch.serve.api.schemas import ErrorOut, LsoStallPage
from txnwatch.store import queries

router = APIRouter(prefix="/lso-stalls", tags=["LSO stalls"])

DEFAULT_LOOKBACK = timedelta(hours=24)


@router.get("", response_model=LsoStallPage, summary="Open and recent LSO stall episodes",
            description="While the LSO of a partition stands still and its high watermark moves, read_committed "
                        "consumers of the partition are stuck at the LSO. Each episode records the stuck offset, "
                        "the largest HWM − LSO seen and the producer (id, epoch, transactional id) whose open "
                        "transaction blocks it, with the abort command for its start offset, the blocked consumer "
                        "groups and the records hidden from them. Returns every open episode plus those that ended since `since`; "
                        "newest first.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_lso_stalls(
    session: ReadSession,
    runtime: RuntimeDep,
    clusters: ClusterFilter,
    since: Annotated[UtcDatetime | None, Query(description="Include episodes that ended at or after this time "
                                               "(ISO 8601; naive means UTC). Default: 24 hours ago.")] = None,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> Response:
    at = now()
    # The default window slides between pages, so only an explicit `since` is part of the cursor.
    kind = f"lso:{since.isoformat() if since is not None else 'default'}"
    since = since if since is not None else at - DEFAULT_LOOKBACK
    after = decode_cursor(cursor, kind, (datetime, int))
    rows = queries.list_lso_stalls(session, clusters=clusters.names, since=since, after=after, limit=limit)
    cursor_out = next_cursor(kind, rows, limit, lambda r: (r.started_at, r.id))
    incidents = IncidentBuilder(session, runtime.settings, at, runtime.state)
    return json_response(LsoStallPage, {"items": incidents.stall_all([(r, r.cluster_name) for r in rows]),
                                        "next_cursor": cursor_out})
