"""Admin action: abort a hanging transaction with WriteTxnMarkers, as `kafka-transactions.sh abort` does.

Off unless ``api.admin_enabled``; needs the admin bearer token; a dry run unless the
caller says otherwise; every call, dry or not, allowed or refused by Kafka, is audited.
"""

from __future__ import annotations

import hmac
from datetime import datetime, timezone
from typing import Annotated

from fastapi import APIRouter, Depends, Header, HTTPException, status
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from txnwatch.api.deps import RuntimeDep, SessionDep
from txnwatch.model import AbortOutcome, ClusterUnreachable, TopicPartition
from txnwatch.store.models import AdminAudit

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])


def require_admin(runtime: RuntimeDep, authorization: Annotated[str | None, Header()] = None) -> str:
    api = runtime.settings.api
    if not api.admin_enabled or api.admin_token is None:
        raise HTTPException(status.HTTP_403_FORBIDDEN, "admin actions are disabled (api.admin_enabled: false)")
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(token.encode(), api.admin_token.get_secret_value().encode()):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "admin bearer token missing or wrong",
                            headers={"WWW-Authenticate": 'Bearer realm="txnwatch-admin"'})
    return "admin-token"


class AbortRequest(BaseModel):
    cluster: str
    topic: str = Field(min_length=1, max_length=249)
    partition: int = Field(ge=0)
    producer_id: int = Field(ge=0)
    producer_epoch: int = Field(ge=0, le=32767)
    coordinator_epoch: int | None = Field(default=None, ge=0,
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
                        404: {"description": "Unknown cluster"},
                        409: {"description": "Nothing to abort: no such open transaction"},
                        503: {"description": "Cluster unreachable"}})
async def abort(body: AbortRequest, runtime: RuntimeDep, session: SessionDep,
                actor: Annotated[str, Depends(require_admin)]) -> AbortResponse:
    config = next((c for c in runtime.settings.clusters if c.name == body.cluster), None)
    if config is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {body.cluster!r}")
    tp = TopicPartition(body.topic, body.partition)

    def call() -> AbortOutcome:
        return runtime.abort_transaction(config, tp, body.producer_id, body.producer_epoch, body.coordinator_epoch,
                                         dry_run=body.dry_run)

    try:
        result = await run_in_threadpool(call)
        outcome = ("aborted" if result.aborted else "would abort" if result.error is None
                   else f"{result.error.name}: {result.error.message}")
    except ClusterUnreachable as exc:
        result, outcome = None, f"cluster unreachable: {exc}"
    audit = AdminAudit(at=datetime.now(timezone.utc), actor=actor, action="abort_transaction", cluster=body.cluster,
                       target=body.model_dump(exclude={"cluster", "dry_run"}), dry_run=body.dry_run, outcome=outcome)
    session.add(audit)
    session.commit()
    if result is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, outcome, headers={"Retry-After": "10"})
    if result.error is not None:
        raise HTTPException(status.HTTP_409_CONFLICT, outcome)
    return AbortResponse(cluster=body.cluster, topic=body.topic, partition=body.partition,
                         producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                         coordinator_epoch=result.coordinator_epoch, leader_id=result.leader_id,
                         txn_start_offset=result.txn_start_offset, dry_run=body.dry_run, aborted=result.aborted,
                         outcome=outcome, audit_id=audit.id)
