"""Hanging transactions: open transactions on partitions that nothing will ever finish."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query, Response

from txnwatch.serve.api.deps import ClusterFilter, ReadSession, RuntimeDep
from txnwatch.serve.api.incidents import IncidentBuilder
from txnwatch.serve.api.params import CursorParam, Limit, decode_cursor, json_response, next_cursor, now
from txnwatch.serve.api.schemas import ErrorOut, HangingPage
from txnwatch.store import queries

router = APIRouter(prefix="/hanging", tags=["hanging transactions"])


@router.get("", response_model=HangingPage, summary="Hanging transactions (open episodes by default)",
            description="A hanging transaction pins the LSO of its partition, so read_committed consumers of "
                        "that partition stop making progress, and the log cannot be compacted past it. Each "
                        "episode names the partition, the producer id/epoch and, when the coordinator knows it, "
                        "the transactional id. Episodes with no transactional id are the classic case that "
                        "only an abort with WriteTxnMarkers ends: `abort_command` is the `txnwatch abort` line that "
                        "does it as printed (`kafka_abort_command` the same with `kafka-transactions.sh`). `blocked_groups` and `invisible_records` say whom it hurts; `open_seconds` counts from "
                        "the first write, `last_write_age_seconds` from the last. Newest first.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_hanging(
    session: ReadSession,
    runtime: RuntimeDep,
    clusters: ClusterFilter,
    include_resolved: Annotated[bool, Query(description="Also episodes that have ended.")] = False,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> Response:
    kind = f"hanging:{int(include_resolved)}"
    after = decode_cursor(cursor, kind, (datetime, int))
    rows = queries.list_hanging(session, clusters=clusters.names, include_resolved=include_resolved, after=after,
                                limit=limit)
    incidents = IncidentBuilder(session, runtime.settings, now(), runtime.state)
    cursor_out = next_cursor(kind, rows, limit, lambda r: (r.first_seen_at, r.id))
    return json_response(HangingPage, {"items": incidents.hanging_all([(r, r.cluster_name) for r in rows]),
                                       "next_cursor": cursor_out})

