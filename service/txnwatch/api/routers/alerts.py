"""Alerts raised by the built-in evaluator, as PagerDuty sees them."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Query

from txnwatch.api.deps import SessionDep
from txnwatch.api.routers.convert import from_row
from txnwatch.api.routers.params import CursorParam, Limit, ScopeDep, decode_cursor, next_cursor
from txnwatch.api.schemas import AlertOut, AlertPage, ErrorOut
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
    session: SessionDep,
    scope: ScopeDep,
    state: Annotated[list[AlertState] | None, Query(description="Repeat for several.")] = None,
    limit: Limit = 100,
    cursor: CursorParam = None,
) -> AlertPage:
    kind = "alerts"
    after = decode_cursor(cursor, kind, (datetime, int))
    rows = queries.list_alerts(session, cluster_ids=scope.id_list, with_unscoped=not scope.explicit,
                               states=[s.value for s in state or ()], after=after, limit=limit)
    return AlertPage(items=[from_row(AlertOut, a, cluster=name) for a, name in rows],
                     next_cursor=next_cursor(kind, rows, limit, lambda r: (r[0].started_at, r[0].id)))
