"""KIP-890-style verification metrics, computed from outside the brokers."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response

from txnwatch.api.routers.params import ClusterFilter, ReadSession, json_response, now
from txnwatch.api.schemas import ErrorOut, VerificationReport, VerificationStats
from txnwatch.store import queries

router = APIRouter(prefix="/verification", tags=["verification"])


@router.get("", response_model=VerificationReport, summary="Partition verification time and failure rate",
            description="Per cluster, over the last `window_seconds`: the distribution of the time from a "
                        "partition showing a producer's open transaction (DescribeProducers) until the "
                        "coordinator lists that partition in the transaction (VerificationTimeMs-style), and "
                        "the share of checks where the coordinator never listed it within the grace period "
                        "(VerificationFailureRate-style). Failures are how hanging transactions start on "
                        "brokers without KIP-890 verification.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def verification(
    session: ReadSession,
    clusters: ClusterFilter,
    window_seconds: Annotated[int, Query(ge=60, le=30 * 86400, description="Look-back window.")] = 3600,
) -> Response:
    scope = clusters.resolve(session)
    end = now()
    start = end - timedelta(seconds=window_seconds)
    stats = []
    for name in scope.names:
        cid = scope.ids.get(name)
        agg = (queries.verification_stats(session, cid, start, end) if cid is not None
               else queries.VerificationAgg(0, 0, 0, None, (None,) * len(queries.PERCENTILES)))
        p50, p95, p99 = agg.percentiles
        stats.append(VerificationStats(
            cluster=name, window_seconds=window_seconds, window_start=start, window_end=end, samples=agg.samples,
            timed=agg.timed, verification_ms_p50=p50, verification_ms_p95=p95, verification_ms_p99=p99,
            verification_ms_max=agg.max_ms, failed=agg.failed,
            failure_rate=agg.failed / agg.samples if agg.samples else None))
    return json_response(VerificationReport, {"clusters": stats})
