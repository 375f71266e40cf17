"""Admin actions: abort a hanging transaction with WriteTxnMarkers, as `kafka-transactions.sh abort` does, or by its
transactional id, as Kafka 4.1's `kafka-transactions.sh forceTerminateTransaction --transactionalId X` does; end
every console session without rotating the read token.

Off unless ``api.admin_enabled``; needs the admin bearer token; a dry run unless the caller says otherwise.
The guard, the write-ahead audit and the call are txnwatch.remedy's, shared with `txnwatch abort`: the intent
(the credential, the client address, the target) is committed before Kafka is asked anything, the outcome after.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, TypeVar

from fastapi import APIRouter, Depends, HTTPException, Request, status
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from txnwatch.core.commands import TRANSACTIONAL_ID_MAX
from txnwatch.remedy.audit import Audit, AuditUnwritable, Who
from txnwatch.remedy.commands import AbortById, AbortPartition, Command
from txnwatch.remedy.console_sessions import ACTION as SESSIONS_ACTION
from txnwatch.remedy.console_sessions import end_every_session
from txnwatch.remedy.execute import Done, NothingSent, execute
from txnwatch.remedy.guard import AdminRefused, check_admin
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve.api.deps import RuntimeDep
from txnwatch.serve.api.params import INT32_MAX, INT64_MAX
from txnwatch.serve.api.security import bearer_token, too_many
from txnwatch.serve.api.throttle import AuthThrottle, client_key

log = logging.getLogger(__name__)

router = APIRouter(prefix="/api/v1/admin", tags=["admin"])

R = TypeVar("R")


def client_address(request: Request) -> str | None:
    """The address the request came from, as the auth throttle sees it: uvicorn puts the X-Forwarded-For client
    there when the peer is one of ``api.trusted_proxies`` (txnwatch.supervise.server.proxy_options)."""
    return request.client.host if request.client else None


def require_admin(request: Request, runtime: RuntimeDep) -> str:
    """The admin token's check: 403 when admin actions are off, 429 for a client that failed too often, 401
    (audited, counted, logged once per window) for a missing or wrong token.  Runs before the body is
    validated, so a caller without the token learns nothing about the request's shape."""
    return _admin(request, runtime, "abort_transaction")


def require_admin_for_sessions(request: Request, runtime: RuntimeDep) -> str:
    """:func:`require_admin` for ending the console sessions (a refused attempt's audit row names that action)."""
    return _admin(request, runtime, SESSIONS_ACTION)


def _admin(request: Request, runtime: Runtime, action: str) -> str:
    throttle: AuthThrottle = request.app.state.auth_throttle
    address = client_address(request)
    client = client_key(address)
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
            try:
                Audit(runtime.sessions).refused(client=address, counted_as=client, reason=str(exc),
                                                throttled=failure.retry_after_s is not None, action=action)
            except AuditUnwritable as unwritable:  # refused either way: the answer does not wait for the database
                log.warning("a refused admin attempt from %s was not audited: %s", client, unwritable.reason)
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "admin bearer token missing or wrong",
                            headers={"WWW-Authenticate": 'Bearer realm="txnwatch-admin"'}) from None


async def _run(command: Command[R], dry_run: bool, request: Request, runtime: RuntimeDep,
               credential: str) -> tuple[Done[R], R]:
    """Both abort routes' door: the cluster (404), the command under the write-ahead audit in a worker thread, and
    what the answer codes say: 503 when the intent could not be recorded (nothing sent) or Kafka was not reached,
    409 when Kafka refused. Returns what was done and Kafka's answer."""
    config = next((c for c in runtime.settings.clusters if c.name == command.cluster), None)
    if config is None:
        raise HTTPException(status.HTTP_404_NOT_FOUND, f"unknown cluster {command.cluster!r}")
    who = Who(f"api:{credential}", client_address(request))
    try:
        done: Done[R] = await run_in_threadpool(execute, command, calls=runtime.admin_calls, config=config,
                                                dry_run=dry_run, who=who, audit=Audit(runtime.sessions))
    except NothingSent as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, str(exc), headers={"Retry-After": "10"}) from None
    sent, note = done.sent, done.unrecorded_note
    detail = sent.outcome if note is None else note
    if sent.result is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, detail, headers={"Retry-After": "10"})
    if sent.refused:
        raise HTTPException(status.HTTP_409_CONFLICT, detail)
    return done, sent.result


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
    outcome_recorded: bool = Field(description="False when the database failed after Kafka answered: the audit row "
                                               "holds the intent only (audit_warning says so). Never retry then.")
    audit_warning: str | None = None


@router.post("/abort", response_model=AbortResponse, summary="Abort an open transaction on a partition",
             responses={401: {"description": "Missing or wrong admin token"},
                        403: {"description": "Admin actions disabled"},
                        429: {"description": "Too many failed authentications from this client; see Retry-After"},
                        404: {"description": "Unknown cluster"},
                        409: {"description": "Nothing to abort: no such open transaction"},
                        503: {"description": "Cluster unreachable; or the audit could not record the intent, so "
                                             "nothing was sent to Kafka (safe to retry)"}})
async def abort(body: AbortRequest, request: Request, runtime: RuntimeDep,
                credential: Annotated[str, Depends(require_admin)]) -> AbortResponse:
    command = AbortPartition(body.cluster, body.topic, body.partition, body.producer_id, body.producer_epoch,
                             body.coordinator_epoch)
    done, result = await _run(command, body.dry_run, request, runtime, credential)
    note = done.unrecorded_note
    assert done.audit_id is not None  # always audited here
    return AbortResponse(cluster=body.cluster, topic=body.topic, partition=body.partition,
                         producer_id=body.producer_id, producer_epoch=body.producer_epoch,
                         coordinator_epoch=result.coordinator_epoch, leader_id=result.leader_id,
                         txn_start_offset=result.txn_start_offset, dry_run=body.dry_run, aborted=result.aborted,
                         outcome=done.sent.outcome, audit_id=done.audit_id, outcome_recorded=note is None,
                         audit_warning=note)


class AbortByIdRequest(BaseModel):
    cluster: str
    transactional_id: str = Field(min_length=1, max_length=TRANSACTIONAL_ID_MAX)
    dry_run: bool = Field(default=True, description="Check only; set false to abort (this fences the id's producer).")


class AbortByIdResponse(BaseModel):
    cluster: str
    transactional_id: str
    coordinator_id: int | None
    state: str | None = Field(description="The coordinator's state of the id before the call (Ongoing to abort).")
    producer_id: int | None
    producer_epoch: int | None
    partitions: list[str] = Field(description="The partitions of the ongoing transaction, as topic-partition.")
    lowest_release: str | None = Field(description="The oldest broker's Kafka release line, as ApiVersions shows it.")
    dry_run: bool
    aborted: bool = Field(description="The coordinator completed the abort and answered the id's new epoch.")
    started: bool = Field(description="The coordinator began the abort; it completes it even when `aborted` is "
                                      "false (not confirmed in time). Never send it again then.")
    new_producer_id: int | None
    new_producer_epoch: int | None
    outcome: str
    audit_id: int
    outcome_recorded: bool
    audit_warning: str | None = None


@router.post("/abort-by-id", response_model=AbortByIdResponse,
             summary="Abort a transactional id's ongoing transaction (Kafka 4.1+ forceTerminateTransaction)",
             responses={401: {"description": "Missing or wrong admin token"},
                        403: {"description": "Admin actions disabled"},
                        429: {"description": "Too many failed authentications from this client; see Retry-After"},
                        404: {"description": "Unknown cluster"},
                        409: {"description": "Nothing to abort (no ongoing transaction), or the cluster is older "
                                             "than Kafka 4.1: the detail names the partition abort instead"},
                        503: {"description": "Cluster unreachable; or the audit could not record the intent, so "
                                             "nothing was sent to Kafka (safe to retry)"}})
async def abort_by_id(body: AbortByIdRequest, request: Request, runtime: RuntimeDep,
                      credential: Annotated[str, Depends(require_admin)]) -> AbortByIdResponse:
    """The same guard and write-ahead audit as the partition abort; the call is txnwatch.kafka.terminate's."""
    done, result = await _run(AbortById(body.cluster, body.transactional_id), body.dry_run, request, runtime,
                              credential)
    note = done.unrecorded_note
    assert done.audit_id is not None  # always audited here
    return AbortByIdResponse(
        cluster=body.cluster, transactional_id=body.transactional_id, coordinator_id=result.coordinator_id,
        state=result.state, producer_id=result.producer_id, producer_epoch=result.producer_epoch,
        partitions=[f"{tp.topic}-{tp.partition}" for tp in result.partitions], lowest_release=result.lowest_release,
        dry_run=body.dry_run, aborted=result.aborted, started=result.started, new_producer_id=result.new_producer_id,
        new_producer_epoch=result.new_producer_epoch, outcome=done.sent.outcome, audit_id=done.audit_id,
        outcome_recorded=note is None, audit_warning=note)


class EndSessionsResponse(BaseModel):
    ended: int = Field(description="How many console sessions were live and are now ended.")
    audit_id: int
    outcome: str


@router.post("/console-sessions/end", response_model=EndSessionsResponse,
             summary="End every console session (without rotating the read token)",
             responses={401: {"description": "Missing or wrong admin token"},
                        403: {"description": "Admin actions disabled"},
                        429: {"description": "Too many failed authentications from this client; see Retry-After"},
                        503: {"description": "The database could not be written: no session was ended (safe to "
                                             "retry)"}})
async def end_console_sessions(request: Request, runtime: RuntimeDep,
                               credential: Annotated[str, Depends(require_admin_for_sessions)]) -> EndSessionsResponse:
    """Every console session signed in so far is refused from its next request on, on every worker and replica;
    bearer tokens (scrapers, API clients) are untouched, and whoever has the read token may sign in again.  The
    audit row is written in the same transaction (txnwatch.remedy.console_sessions)."""
    who = Who(f"api:{credential}", client_address(request))
    try:
        ended = await run_in_threadpool(end_every_session, Audit(runtime.sessions), who)
    except AuditUnwritable as exc:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, f"no console session was ended: the database "
                            f"could not be written ({exc.reason}); retry shortly", headers={"Retry-After": "10"}) from None
    log.info("%s from %s ended every console session: %s (audit row %d)", who.actor, who.client, ended.outcome,
             ended.audit_id)
    return EndSessionsResponse(ended=ended.count, audit_id=ended.audit_id, outcome=ended.outcome)
