"""Admin action: abort a hanging transaction with WriteTxnMarkers, as `kafka-transactions.sh abort` does.

Off unless ``api.admin_enabled``; needs the admin bearer token; a dry run unless the
caller says otherwise; every call, dry or not, allowed or refused by Kafka, is audited.
The guard, the Kafka call and the audit are txnwatch.runtime.admin's, shared with `txnwatch abort`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from txnwatch.runtime.admin import (
    AbortTarget,
    AdminRefused,
    audit,
    audit_refused,
    call_kafka,
    check_admin,
    cluster_config,
)
from txnwatch.serve.api.deps import RuntimeDep, SessionDep
from txnwatch.serve.api.params import INT32_MAX, INT64_MAX
from txnwatch.serve.api.security import bearer_token, too_many
from txnwatch.serve.api.throttle import AuthThrottle, client_key

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])


def require_admin(request: Request, runtime: RuntimeDep, session: SessionDep) -> str:
    """The admin token's check: 403 when admin actions are off, 429 for a client that failed too often, 401
    (audited, counted, logged once per window) for a missing or wrong token.  Runs before the body is
    validated, so a caller without the token learns nothing about the request's shape."""
    throttle: AuthThrottle = request.app.state.auth_throttle
    client = client_key(request.client.host if request.client else None)
    retry_after = throttle.blocked(client, "admin")
    if retry_after is not None:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, json.loads(too_many(retry_after)[2])["detail"],
                            headers={"Retry-After": str(retry_after)})
    raw = request.headers.get("authorization")
    offered = bearer_token(raw.encode("latin-1") if raw is not None else None)
    try:
        return check_admin(runtime.settings, offered)
    except AdminRefused as exc:
        if exc.disabled:
            raise HTTPException(status.HTTP_403_FORBIDDEN, str(exc)) from None
        failure = throttle.failed(client, "admin", str(exc))
        if failure.audit:
            audit_refused(session, client=client, reason=str(exc), throttled=failure.retry_after_s is not None)
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "admin bearer token missing or wrong",
                            headers={"WWW-Authenticate": 'Bearer realm="txnwatch-admin"'}) from None


class AbortRequest(BaseModel):
    cluster: str
    topic: str = Field(min_length=1, max_length=249)
    partition: int = Field(ge=0, le=INT32_MAX)
    producer_id: int = Field(ge=0, le=INT64_MAX)
    producer_epoch: int = Field(ge=0, le=32767)
    coordinator_epoch: int | None = Field(default=None, ge=0, le=INT32_MAX,
                                          description="Defaults to the one the partition leader reports.")
    dry_run: bool = Field(default=True, description="Check only; set false to write the ABORT marker.")


class AbortResponse(BaseModel):
    cluster: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int | None
    leader_id: int | None
    txn_start_offset: int | None
    dry_run: bool
    aborted: bool
    outcome: str
    audit_id: int


@router.post("/abort", response_model=AbortResponse, summary="Abort an open transaction on a partition",
             responses={401: {"description": "Missing or wrong admin token"},
                        403: {"description": "Admin actions disabled"},
                        429: {"description": "Too many failed authentications from this client; see Retry-After"},
                        404: {"description": "Unknown cluster"},
                        409: {"description": "Nothing to abort: no such open transaction"},
                        503: {"description": "Cluster unreachable"}})
async def abort(body: AbortRequest, runtime: RuntimeDep, session: SessionDep,
                actor: Annotated[str, Depends(require_admin)]) -> AbortResponse:
    config = cluster_config(runtime.settings, body.cluster)
    if config is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {body.cluster!r}")
    target = AbortTarget(body.cluster, body.topic, body.partition, body.producer_id, body.producer_epoch,
                         body.coordinator_epoch)
    result: Any
    result, outcome = await run_in_threadpool(call_kafka, runtime.abort_transaction, config, target, body.dry_run)
    audit_id = audit(session, actor=actor, target=target, dry_run=body.dry_run, outcome=outcome)
    if result is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, outcome, headers={"Retry-After": "10"})
    if result.error is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, outcome)
    return AbortResponse(cluster=body.cluster, topic=body.topic, partition=body.partition,
                         producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                         coordinator_epoch=result.coordinator_epoch, leader_id=result.leader_id,
                         txn_start_offset=result.txn_start_offset, dry_run=body.dry_run, aborted=result.aborted,
                         outcome=outcome, audit_id=audit_id)
