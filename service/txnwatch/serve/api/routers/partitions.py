"""Partition offsets: where read_committed consumers can read up to, and what they cannot see."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from txnwatch.serve.api.convert import from_row, gap
from txnwatch.serve.api.deps import ClusterFilter, ReadSession
from txnwatch.serve.api.params import TOPIC_PATTERN, CursorParam, Limit, decode_cursor, json_response, next_cursor
from txnwatch.serve.api.schemas import ErrorOut, PartitionOut, PartitionPage
from txnwatch.store import queries

router = APIRouter(prefix="/partitions", tags=["partitions"])


@router.get("", response_model=PartitionPage, summary="Latest offsets of each partition: HWM, LSO, HWM − LSO",
            description="From the latest poll of each cluster: high watermark, last stable offset, the gap "
                        "between them (records read_committed consumers cannot see yet), the earliest offset "
                        "and how many producers hold an open transaction on the partition. A large or growing "
                        "HWM − LSO with open transactions points at a slow or hanging transaction. Ordered by "
                        "cluster, topic, partition.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_partitions(
    session: ReadSession,
    clusters: ClusterFilter,
    topic: Annotated[str | None, Query(pattern=TOPIC_PATTERN, description="Only this topic.")] = None,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> Response:
    kind = "partitions"
    after = decode_cursor(cursor, kind, (int, str, int))
    rows = queries.list_partitions(session, clusters.names, topic=topic, after=after, limit=limit)
    items = [from_row(PartitionOut, r, cluster=r.cluster_name,
                      hwm_minus_lso=gap(r.high_watermark, r.last_stable_offset)) for r in rows]
    cursor_out = next_cursor(kind, rows, limit, lambda r: (r.cluster_id, r.topic, r.partition))
    return json_response(PartitionPage, {"items": items, "next_cursor": cursor_out})
