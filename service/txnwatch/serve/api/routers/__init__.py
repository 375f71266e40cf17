"""REST routers under /api/v1, one module per resource."""

from __future__ import annotations

from fastapi import APIRouter, Depends, FastAPI

from txnwatch.serve.api.routers import (
    admin,
    alerts,
    clusters,
    consumer_groups,
    hanging,
    lingering,
    lso_stalls,
    partitions,
    reports,
    transactions,
    verification,
)
from txnwatch.serve.api.schemas import ErrorOut
from txnwatch.serve.api.security import require_reader

API_PREFIX = "/api/v1"

_READ_ROUTERS = (clusters, transactions, hanging, lingering, lso_stalls, partitions, consumer_groups, verification, alerts,
                 reports)


def register(app: FastAPI) -> None:
    api = APIRouter(prefix=API_PREFIX, dependencies=[Depends(require_reader)],
                    responses={401: {"model": ErrorOut, "description": "`api.read_token` is set and the bearer "
                                                                      "token is missing or wrong."},
                               503: {"model": ErrorOut, "description": "Database unreachable; retry."}})
    for module in _READ_ROUTERS:
        api.include_router(module.router)
    app.include_router(api)
    # Has its own (admin) token, so it sits outside the read-token scope.
    app.include_router(admin.router)
