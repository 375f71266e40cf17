"""Watched clusters and whether txnwatch can see them."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, Response

from txnwatch.core.config import ClusterConfig
from txnwatch.core.epoch import from_ms
from txnwatch.core.hazards import cluster_hazards, epoch_headroom
from txnwatch.core.redact import redact, redact_optional
from txnwatch.core.views import ClusterView
from txnwatch.core.vocabulary import HAZARDS
from txnwatch.serve.api.convert import canary_view
from txnwatch.serve.api.deps import PathCluster, ReadSession, RuntimeDep, cluster_ref
from txnwatch.serve.api.params import json_response
from txnwatch.serve.api.schemas import ClusterDetail, ClusterSummary, ErrorOut, HistoryGapOut
from txnwatch.store import models as m
from txnwatch.store import queries

router = APIRouter(prefix="/clusters", tags=["clusters"])
MAX_ERRORS_SHOWN = 50


def _summary(config: ClusterConfig, record: m.Cluster | None, counts: queries.PollCounts,
             view: ClusterView | None) -> ClusterSummary:
    """The database knows every replica's polls; this process's view may be fresher than its last write
    (e.g. while the database is down), so the newer of the two decides the status."""
    view_at = from_ms(view.last_poll_at_ms) if view is not None else None
    db_at = record.last_poll_at if record is not None else None
    if view is not None and view_at is not None and (db_at is None or view_at >= db_at):
        last_poll: datetime | None
        up, last_poll, last_error = view.up, view_at, view.last_error
    elif record is not None:
        up, last_poll, last_error = record.up, record.last_poll_at, record.last_error
    else:
        up, last_poll, last_error = False, None, None
    successes = [t for t in (record.last_success_at if record else None,
                             from_ms(view.last_success_at_ms) if view else None) if t is not None]
    history = view.history if view is not None else None
    return ClusterSummary(name=config.name, bootstrap_servers=list(config.bootstrap_servers), up=up,
                          last_poll_at=last_poll, last_success_at=max(successes, default=None),
                          last_error=redact_optional(last_error), polls=counts.total, failed_polls=counts.failed,
                          history_mode=history.mode if history else "polling",
                          history_mode_reason=history.reason if history else "",
                          txnlog_lag_records=history.lag_records if history else None,
                          history_gaps=[HistoryGapOut(log_partition=g.log_partition, first_offset=g.first_offset,
                                                      last_offset=g.last_offset, records=g.records,
                                                      after=from_ms(g.after_ms), before=from_ms(g.before_ms))
                                        for g in (history.gaps if history else ())])


@router.get("", response_model=list[ClusterSummary], summary="Watched Kafka clusters and their poll status",
            description="Every configured cluster, whether its latest poll reached it, and since when it has "
                        "been failing. A cluster that is down keeps its last known transactions and offsets "
                        "in the other endpoints; check `last_success_at` before trusting them.")
def list_clusters(session: ReadSession, runtime: RuntimeDep) -> list[ClusterSummary]:
    records = queries.cluster_records(session)
    counts = queries.poll_counts(session)
    summaries = []
    for config in runtime.settings.clusters:
        record = records.get(config.name)
        polls = counts.get(record.id) if record is not None else None
        summaries.append(_summary(config, record, polls or queries.PollCounts(), runtime.state.get(config.name)))
    return summaries


@router.get("/{cluster}", response_model=ClusterDetail, summary="One cluster: status and what needs attention",
            description="Poll status plus counts of open transactions, open hanging-transaction episodes, "
                        "stalled LSOs and firing alerts.",
            responses={404: {"model": ErrorOut, "description": "No cluster of that name is configured."}})
def get_cluster(name: PathCluster, session: ReadSession, runtime: RuntimeDep) -> Response:
    cluster = cluster_ref(session, name)
    config = next(c for c in runtime.settings.clusters if c.name == cluster.name)
    record = queries.cluster_records(session, [cluster.name]).get(cluster.name)
    if cluster.id is None:
        counts, activity = queries.PollCounts(), queries.ClusterActivity(0, 0, 0, 0)
    else:
        counts = queries.poll_counts(session, cluster.id).get(cluster.id, queries.PollCounts())
        activity = queries.cluster_activity(session, cluster.id)
    view = runtime.state.get(cluster.name)
    summary = _summary(config, record, counts, view)
    snapshot = view.snapshot if view is not None else None
    errors = [dict(api=e.api, target=e.target, name=e.name, error_class=e.error_class.value, advice=e.advice,
                   message=redact(e.message)) for e in (snapshot.errors if snapshot is not None else ())[:MAX_ERRORS_SHOWN]]
    findings = view.findings if view is not None else None
    omitted = [dict(kind=kind, reason=reason, count=count)
               for (kind, reason), count in sorted((findings.omitted if findings is not None else {}).items()) if count]
    releases = snapshot.broker_releases if snapshot is not None else ()
    hazards = [dict(hazard=h, title=HAZARDS[h].title, explanation=HAZARDS[h].explanation,
                    affected=HAZARDS[h].affected, fix=HAZARDS[h].fix) for h in cluster_hazards(releases)]
    headroom = [dict(transactional_id=r.transactional_id, producer_id=r.producer_id, producer_epoch=r.producer_epoch,
                     headroom=r.headroom) for r in epoch_headroom(snapshot.transactions.values() if snapshot else ())]
    return json_response(ClusterDetail, {**summary.model_dump(), **activity.__dict__, "request_errors": errors,
                                         "omitted": omitted, "known_hazards": hazards, "epoch_headroom": headroom,
                                         "canary": canary_view(view.canary) if view and view.canary else None,
                                         "brokers_release": [dict(broker=r.node_id, release=r.label,
                                                                  transaction_version=r.transaction_version)
                                                             for r in releases]})
