"""Transactions as the coordinators report them, and the history of one transactional id."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from txnwatch.core.model import TxnState, split_topic_partition
from txnwatch.serve.api.convert import framework_of, from_row, gap, transition_view
from txnwatch.serve.api.deps import ClusterFilter, PathCluster, ReadSession, RuntimeDep, cluster_ref, not_found
from txnwatch.serve.api.incidents import IncidentBuilder
from txnwatch.serve.api.params import (
    TOPIC_PATTERN,
    CursorParam,
    Limit,
    Text,
    decode_cursor,
    json_response,
    next_cursor,
    now,
)
from txnwatch.serve.api.schemas import ErrorOut, TransactionDetail, TransactionPage, TxnLogHistory
from txnwatch.store import queries, txnlog_queries
from txnwatch.store.queries import TxnSort

router = APIRouter(prefix="/transactions", tags=["transactions"])

MAX_AGE_SECONDS = 10 * 365 * 86400


class Order(StrEnum):
    ASC = "asc"
    DESC = "desc"


def summary(row: queries.TxnRow, at: datetime) -> dict[str, Any]:
    t = row.txn
    return dict(
        cluster=row.cluster, transactional_id=t.transactional_id, state=t.state, producer_id=t.producer_id,
        producer_epoch=t.producer_epoch, coordinator_id=t.coordinator_id, timeout_ms=t.timeout_ms,
        txn_started_at=t.txn_started_at, age_seconds=row.age_seconds(at), partitions=list(t.partitions or []),
        hanging=row.hanging, first_seen_at=t.first_seen_at, last_seen_at=t.last_seen_at, gone_at=t.gone_at,
        source=t.source, framework=framework_of(t.transactional_id))


@router.get("", response_model=TransactionPage, summary="Transactions, filtered and paginated",
            description="The coordinators' latest view of each transactional id. Typical questions: which "
                        "transactions have been open longer than a minute (`min_age_seconds=60`), which touch a "
                        "topic whose read_committed consumers are stuck (`topic=orders`), which are hanging "
                        "(`hanging=true`). Oldest open transactions come first by default.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_transactions(
    session: ReadSession,
    clusters: ClusterFilter,
    state: Annotated[list[TxnState] | None, Query(description="Coordinator state; repeat for several.")] = None,
    min_age_seconds: Annotated[float | None, Query(ge=0, le=MAX_AGE_SECONDS, description="Only open transactions "
                                                   "(Ongoing, Prepare*) running at least this long.")] = None,
    id_prefix: Annotated[Text | None, Query(min_length=1, max_length=512, description="transactional.id prefix "
                                            "(case-sensitive), e.g. a Kafka Streams application id.")] = None,
    topic: Annotated[str | None, Query(pattern=TOPIC_PATTERN, description="Only transactions with a partition of "
                                       "this topic.")] = None,
    hanging: Annotated[bool | None, Query(description="true: only ids with an open hanging episode; false: only "
                                          "ids without one.")] = None,
    include_gone: Annotated[bool, Query(description="Also ids the coordinators no longer list (expired).")] = False,
    sort: Annotated[TxnSort, Query(description="Sort key; `age` is how long the open transaction has run.")]
    = TxnSort.AGE,
    order: Annotated[Order | None, Query(description="Default: desc for age (oldest first), asc otherwise.")]
    = None,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> Response:
    descending = (order or (Order.DESC if sort is TxnSort.AGE else Order.ASC)) is Order.DESC
    kind = f"txn:{sort.value}:{'desc' if descending else 'asc'}"
    after = decode_cursor(cursor, kind, (datetime if sort is TxnSort.AGE else str, int))
    at = now()
    query = queries.TxnFilter(clusters=clusters.names, states=tuple(s.value for s in state or ()),
                              min_age_seconds=min_age_seconds, id_prefix=id_prefix, topic=topic, hanging=hanging,
                              include_gone=include_gone)
    rows = queries.list_transactions(session, query, sort=sort, descending=descending, after=after, limit=limit,
                                     now=at)
    cursor_out = next_cursor(kind, rows, limit, lambda r: queries.txn_sort_key(r.txn, sort))
    return json_response(TransactionPage, {"items": [summary(r, at) for r in rows], "next_cursor": cursor_out})


@router.get("/{cluster}/{transactional_id:path}", response_model=TransactionDetail,
            summary="One transactional id: state, partitions and history",
            description="Current coordinator state, the transaction's partitions with their latest HWM and LSO, "
                        "open hanging episodes, and the observed state changes newest first: commits, aborts, "
                        "coordinator-timeout aborts with epoch bumps, fencing by a new producer instance. "
                        "Transactional ids may contain '/'; the rest of the path is the id.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster or transactional id."}})
def get_transaction(
    name: PathCluster,
    transactional_id: str,
    session: ReadSession,
    runtime: RuntimeDep,
    timeline_limit: Annotated[int, Query(ge=1, le=1000, description="Most recent transitions to return.")] = 100,
) -> Response:
    cluster = cluster_ref(session, name)
    row = logged = None
    if cluster.id is not None and "\x00" not in transactional_id:
        # The same view of the id as the list (the log's row wins in exact mode); the log's own counts beside.
        row = queries.get_transaction(session, cluster.id, transactional_id)
        logged = queries.logged(session, cluster.id, transactional_id)
    if row is None or cluster.id is None:
        raise not_found(f"transactional id {transactional_id!r} is unknown on cluster {cluster.name!r}")
    at = now()
    timeline = txnlog_queries.timeline(session, cluster.id, cluster.name, transactional_id, timeline_limit + 1,
                                       runtime.settings.retention.archive_dir)
    topics_partitions = [split_topic_partition(tp) for tp in row.txn.partitions or []]
    samples = {(s.topic, s.partition): s for s in
               queries.partition_samples(session, cluster.id, {t for t, _ in topics_partitions})}
    partitions = []
    for topic, partition in topics_partitions:
        s = samples.get((topic, partition))
        partitions.append(dict(
            topic=topic, partition=partition, sampled_at=s.sampled_at if s else None,
            high_watermark=s.high_watermark if s else None, last_stable_offset=s.last_stable_offset if s else None,
            hwm_minus_lso=gap(s.high_watermark, s.last_stable_offset) if s else None,
            open_transactions=s.open_transactions if s else None))
    return json_response(TransactionDetail, dict(
        **summary(row, at),
        partition_offsets=partitions,
        hanging_episodes=IncidentBuilder(session, runtime.settings, at, runtime.state).hanging_all(
            [(e, cluster.name) for e in queries.open_hanging_of(session, cluster.id, transactional_id)]),
        timeline=[transition_view(t) for t in timeline[:timeline_limit]],
        history=None if logged is None else from_row(TxnLogHistory, logged, source="transaction_log"),
        timeline_truncated=len(timeline) > timeline_limit,
    ))


