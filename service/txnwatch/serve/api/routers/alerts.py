"""Alerts raised by the built-in evaluator, as PagerDuty sees them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from txnwatch.alerting.grouping import incident_since, root_cause
from txnwatch.core.vocabulary import BY_RULE
from txnwatch.serve.api.convert import from_row
from txnwatch.serve.api.deps import ClusterFilter, ReadSession
from txnwatch.serve.api.params import CursorParam, Limit, decode_cursor, json_response, next_cursor
from txnwatch.serve.api.schemas import AlertOut, AlertPage, ErrorOut
from txnwatch.store import queries

router = APIRouter(prefix="/alerts", tags=["alerts"])


class AlertState(StrEnum):
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


@router.get("", response_model=AlertPage, summary="Alerts: pending, firing and resolved",
            description="Every alert instance, newest first. `pending` means the condition holds but its `for:` "
                        "duration has not elapsed; `firing` alerts have been sent to PagerDuty. Without a "
                        "`cluster` filter, alerts about txnwatch itself (no cluster) are included.",
            responses={404: {"model": ErrorOut, "description": "Unknown cluster."}})
def list_alerts(
    session: ReadSession,
    clusters: ClusterFilter,
    state: Annotated[list[AlertState] | None, Query(description="Repeat for several.")] = None,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> Response:
    kind = "alerts"
    after = decode_cursor(cursor, kind, (datetime, int))
    rows = queries.list_alerts(session, clusters=clusters.names, with_unscoped=not clusters.explicit,
                               states=[s.value for s in state or ()], after=after, limit=limit)
    cursor_out = next_cursor(kind, rows, limit, lambda r: (r.started_at, r.id))
    return json_response(AlertPage, {"items": [from_row(AlertOut, r, **alert_view(r)) for r in rows],
                                     "next_cursor": cursor_out})


def alert_view(row: Any) -> dict[str, Any]:
    """What a person reads of an alert: its root cause and title, and the incident's one clock."""
    cause = root_cause(row.details, row.rule)
    return dict(cluster=row.cluster_name, root_cause=cause, title=BY_RULE[cause].title if cause in BY_RULE else cause,
                since=incident_since(row.details, row.started_at))
