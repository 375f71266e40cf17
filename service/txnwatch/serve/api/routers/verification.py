"""Verification: txnwatch's partition-side figures (polled, from the store) beside the brokers' own KIP-890 figures
(from their JMX exporters, as of the latest poll)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Response

from txnwatch.core.epoch import from_ms
from txnwatch.core.model import BrokerVerification
from txnwatch.core.redact import redact, redact_optional
from txnwatch.core.views import ClusterView
from txnwatch.serve.api.deps import ClusterFilter, ReadSession, StateDep
from txnwatch.serve.api.params import json_response, now
from txnwatch.serve.api.schemas import (
    BrokerVerificationOut,
    BrokerVerificationSummary,
    ErrorOut,
    VerificationReport,
    VerificationStats,
)
from txnwatch.store import queries

router = APIRouter(prefix="/verification", tags=["verification"])


@router.get("", response_model=VerificationReport, summary="Coordinator listing figures and the brokers' own "
                                                                   "verification figures",
            description="Per cluster, over the last `window_seconds`: txnwatch's partition-side figures, polled "
                        "from outside: the distribution of the time from a partition showing a producer's open "
                        "transaction (DescribeProducers) until the coordinator lists that partition in the "
                        "transaction, and the share of checks where the coordinator never listed it within the "
                        "grace period (how hanging transactions start on brokers without KIP-890 verification). "
                        "Beside them, under `brokers`, the brokers' own KIP-890 VerificationTimeMs and "
                        "VerificationFailureRate from their JMX exporters (cluster option broker_metrics_urls), "
                        "as of the latest poll: what a poller cannot see, such as writes the brokers refused.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def verification(
    session: ReadSession,
    clusters: ClusterFilter,
    state: StateDep,
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
            failure_rate=agg.failed / agg.samples if agg.samples else None,
            brokers=broker_summary(state.get(name))))
    return json_response(VerificationReport, {"clusters": stats})


def broker_summary(view: ClusterView | None) -> BrokerVerificationSummary:
    """The latest poll's broker figures, summed over the brokers that answered."""
    snapshot = view.snapshot if view is not None else None
    figures = snapshot.broker_verification if snapshot is not None else ()
    if not figures:
        return BrokerVerificationSummary(configured=False)
    brokers = [_broker_out(b) for b in figures]
    answered = [b for b in figures if b.ok]
    verifications = _sum(b.verifications for b in answered)
    failures = _sum(b.failures for b in answered)
    p99s = [dict(b.time_ms_quantiles)[0.99] for b in answered if 0.99 in dict(b.time_ms_quantiles)]
    assert snapshot is not None
    return BrokerVerificationSummary(
        configured=True, as_of=from_ms(snapshot.taken_at_ms),
        brokers_up=len(answered), verifications=verifications, failures=failures,
        failure_ratio=failures / verifications if failures is not None and verifications else None,
        time_ms_p99_max=max(p99s, default=None), brokers=brokers)


def _sum(values: Iterable[int | None]) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _broker_out(b: BrokerVerification) -> BrokerVerificationOut:
    quantiles = dict(b.time_ms_quantiles)
    return BrokerVerificationOut(broker=b.broker, url=redact(b.url), up=b.ok, error=redact_optional(b.error), verifications=b.verifications,
                                 failures=b.failures, failures_per_second_1m=b.failures_per_second_1m,
                                 time_ms_p50=quantiles.get(0.5), time_ms_p99=quantiles.get(0.99),
                                 time_ms_max=b.time_ms_max, time_ms_mean=b.time_ms_mean)
