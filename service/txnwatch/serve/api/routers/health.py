"""Liveness and readiness, for Kubernetes probes and load balancers."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict

from txnwatch.serve.api.deps import RuntimeDep
from txnwatch.serve.readiness import ALIVE, readiness

router = APIRouter(tags=["health"])


class Alive(BaseModel):
    """The one answer of /healthz; a real example, not a placeholder (ReDoc and Swagger show it)."""

    model_config = ConfigDict(json_schema_extra={"examples": [{"status": "ok"}]})
    status: Literal["ok"]


READY_EXAMPLE = {"status": "ready", "role": "leader", "clusters_held": ["prod"], "reasons": [],
                 "history": {"prod": {"mode": "exact", "reason": None}}}
NOT_READY_EXAMPLE = {"status": "not ready", "role": "leader", "clusters_held": ["prod"],
                     "reasons": ["cluster prod: last successful poll 95s ago (NoBrokersAvailable)"],
                     "history": {"prod": {"mode": "polling", "reason": "the transaction log is not readable"}}}


@router.get("/healthz", summary="The process is alive", response_model=Alive)
def healthz() -> dict[str, str]:
    return ALIVE


@router.get("/readyz", summary="DB reachable and every cluster polled successfully recently",
            responses={200: {"description": "Ready",
                             "content": {"application/json": {"example": READY_EXAMPLE}}},
                       503: {"description": "Not ready; `reasons` says why",
                             "content": {"application/json": {"example": NOT_READY_EXAMPLE}}}})
def readyz(runtime: RuntimeDep) -> JSONResponse:
    status_code, body = readiness(runtime)
    return JSONResponse(body, status_code=status_code)
