"""Rollups computed by the PySpark pipeline (`txnwatch pipeline run`): trends for reviews, not live state."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from txnwatch.serve.api.deps import PathCluster, ReadSession
from txnwatch.serve.api.params import Text, invalid
from txnwatch.serve.api.schemas import ErrorOut
from txnwatch.store import rollups

router = APIRouter(prefix="/reports", tags=["reports"],
                   responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
Period = Literal["hour", "day"]


class _Row(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    cluster: str
    period: str
    period_start: datetime


class TransactionRollupOut(_Row):
    txn_prefix: str
    topic: str
    txn_count: int
    commits: int
    aborts: int
    timeout_aborts: int
    fences: int
    duration_ms_p50: float | None
    duration_ms_p95: float | None
    duration_ms_p99: float | None
    commit_rate: float | None
    abort_rate: float | None
    timeout_abort_rate: float | None
    fence_rate: float | None


class TopicRollupOut(_Row):
    topic: str
    offset_samples: int
    max_hwm_lso_gap: int | None
    lso_stalls: int
    lso_stall_minutes: float
    hanging_txns: int
    verification_samples: int
    verification_failures: int
    verification_failure_rate: float | None
    verification_ms_p50: float | None
    verification_ms_p95: float | None
    verification_ms_p99: float | None


class LagRollupOut(_Row):
    group_id: str
    topic: str
    samples: int
    lag_lso_p50: float | None
    lag_lso_p95: float | None
    lag_lso_p99: float | None
    lag_lso_max: int | None
    lag_hwm_p95: float | None


class OffenderOut(_Row):
    kind: str
    rank: int
    subject: str
    value: float


class ReportWindow:
    """`since`/`until` as whole UTC days (until inclusive), as the pipeline computes them."""

    def __init__(self, since: Annotated[date | None, Query(description="First UTC day; default 7 days ago.")] = None,
                 until: Annotated[date | None, Query(description="Last UTC day, inclusive; default today.")] = None):
        today = datetime.now(timezone.utc).date()
        first, last = since or today - timedelta(days=7), until or today
        if first > last:
            raise invalid("since", "must not be after until", str(first))
        self.start = datetime.combine(first, time(), timezone.utc)
        # The end is exclusive (the day after `until`), which does not exist for the last representable day.
        self.end = (datetime.combine(last + timedelta(days=1), time(), timezone.utc) if last < date.max
                    else datetime.max.replace(tzinfo=timezone.utc))


WindowDep = Annotated[ReportWindow, Depends()]


@router.get("/{cluster}/transactions", response_model=list[TransactionRollupOut],
            summary="Transaction counts, duration percentiles, commit/abort/timeout/fence rates")
def transactions(cluster: PathCluster, window: WindowDep, session: ReadSession, period: Period = "day",
                 txn_prefix: Text | None = None,
                 topic: Annotated[Text | None, Query(description="A topic, or * (default) for all topics together.")] = "*"
                 ) -> list[TransactionRollupOut]:
    rows = rollups.transaction_rollups(session, cluster, window.start, window.end, period, txn_prefix, topic)
    return [TransactionRollupOut.model_validate(r) for r in rows]


@router.get("/{cluster}/topics", response_model=list[TopicRollupOut],
            summary="LSO stall minutes, max HWM−LSO, hanging transactions and verification health per topic")
def topics(cluster: PathCluster, window: WindowDep, session: ReadSession, period: Period = "day",
           topic: Text | None = None) -> list[TopicRollupOut]:
    return [TopicRollupOut.model_validate(r) for r in
            rollups.topic_rollups(session, cluster, window.start, window.end, period, topic)]


@router.get("/{cluster}/lag", response_model=list[LagRollupOut],
            summary="read_committed lag (against the LSO) percentiles per group and topic")
def lag(cluster: PathCluster, window: WindowDep, session: ReadSession, period: Period = "day",
        group_id: Text | None = None) -> list[LagRollupOut]:
    return [LagRollupOut.model_validate(r) for r in
            rollups.lag_rollups(session, cluster, window.start, window.end, period, group_id)]


@router.get("/{cluster}/offenders", response_model=list[OffenderOut], summary="Top offenders per day and kind")
def offenders(cluster: PathCluster, window: WindowDep, session: ReadSession, kind: Text | None = None,
              limit: Annotated[int, Query(ge=1, le=100)] = 10) -> list[OffenderOut]:
    return [OffenderOut.model_validate(r) for r in
            rollups.top_offenders(session, cluster, window.start, window.end, kind, limit)]
