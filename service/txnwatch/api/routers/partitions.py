"""Partition offsets: where read_committed consumers can read up to, and what they cannot see."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from txnwatch.api.deps import SessionDep
from txnwatch.api.routers.convert import from_row, gap
from txnwatch.api.routers.params import (
    TOPIC_PATTERN,
    CursorParam,
    Limit,
    ScopeDep,
    decode_cursor,
    next_cursor,
)
from txnwatch.api.schemas import ErrorOut, PartitionOut, PartitionPage
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
    session: SessionDep,
    scope: ScopeDep,
    topic: Annotated[str | None, Query(pattern=TOPIC_PATTERN, description="Only this topic.")] = None,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> PartitionPage:
    kind = "partitions"
    after = decode_cursor(cursor, kind, (int, str, int))
    rows = queries.list_partitions(session, scope.id_list, topic=topic, after=after, limit=limit)
    items = [from_row(PartitionOut, s, cluster=name, hwm_minus_lso=gap(s.high_watermark, s.last_stable_offset))
             for s, name in rows]
    return PartitionPage(items=items, next_cursor=next_cursor(
        kind, rows, limit, lambda r: (r[0].cluster_id, r[0].topic, r[0].partition)))
