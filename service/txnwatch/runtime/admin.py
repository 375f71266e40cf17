"""The admin abort, one code path for `POST /api/v1/admin/abort` and `txnwatch abort`.

Both pass the same guard (``api.admin_enabled`` and the admin token), write the ABORT
marker the same way (WriteTxnMarkers, as ``kafka-transactions.sh abort`` does), dry run
unless told otherwise, and write the same audit row for every call, allowed or refused by
Kafka, so the audit trail does not depend on which door on-call used.
"""

from __future__ import annotations

import hmac
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from sqlalchemy.orm import Session

from txnwatch.core.config import ClusterConfig, Settings
from txnwatch.core.model import AbortOutcome, ClusterUnreachable, TopicPartition
from txnwatch.runtime.lifecycle import AbortTransaction
from txnwatch.store.models import AdminAudit


class AdminRefused(Exception):
    """The guard said no; ``disabled`` tells 'turned off' (403) from 'wrong token' (401)."""

    def __init__(self, message: str, *, disabled: bool) -> None:
        super().__init__(message)
        self.disabled = disabled


def check_admin(settings: Settings, offered_token: bytes | str | None) -> str:
    """The actor name for the audit row, or AdminRefused.  Constant-time comparison of bytes: the header's
    bytes as sent (the API), the command line's as UTF-8 (the CLI); an empty token never matches."""
    api = settings.api
    if not api.admin_enabled or api.admin_token is None:
        raise AdminRefused("admin actions are disabled (api.admin_enabled: false)", disabled=True)
    offered = offered_token.encode("utf-8") if isinstance(offered_token, str) else offered_token or b""
    expected = api.admin_token.get_secret_value().encode("utf-8")
    if not expected or not hmac.compare_digest(offered, expected):
        raise AdminRefused("admin token missing or wrong", disabled=False)
    return "admin-token"


@dataclass(frozen=True, slots=True)
class AbortTarget:
    """The transaction to end: by producer id and epoch, or (both None) by ``start_offset`` as Kafka's tool does."""

    cluster: str
    topic: str
    partition: int
    producer_id: int | None
    producer_epoch: int | None
    coordinator_epoch: int | None = None
    start_offset: int | None = None


@dataclass(frozen=True, slots=True)
class AbortDone:
    """What happened: ``result`` is None when the cluster could not be reached."""

    result: AbortOutcome | None
    outcome: str
    audit_id: int

    @property
    def unreachable(self) -> bool:
        return self.result is None

    @property
    def refused(self) -> bool:
        return self.result is not None and self.result.error is not None


def cluster_config(settings: Settings, name: str) -> ClusterConfig | None:
    return next((c for c in settings.clusters if c.name == name), None)


def call_kafka(abort_transaction: AbortTransaction, config: ClusterConfig, target: AbortTarget,
               dry_run: bool) -> tuple[AbortOutcome | None, str]:
    """(result, outcome line); blocking, so the API runs it in a worker thread.  ``abort_transaction`` is the
    runtime's (txnwatch.runtime.wiring.abort_transaction): this module, like the API, talks to no Kafka code itself."""
    tp = TopicPartition(target.topic, target.partition)
    try:
        result = abort_transaction(config, tp, target.producer_id, target.producer_epoch, target.coordinator_epoch,
                                   dry_run=dry_run, start_offset=target.start_offset)
    except ClusterUnreachable as exc:
        return None, f"cluster unreachable: {exc}"
    outcome = ("aborted" if result.aborted else "would abort" if result.error is None
               else f"{result.error.name}: {result.error.message}")
    return result, outcome


def audit(session: Session, *, actor: str, target: AbortTarget, dry_run: bool, outcome: str) -> int:
    row = AdminAudit(at=datetime.now(timezone.utc), actor=actor, action="abort_transaction", cluster=target.cluster,
                     target={k: v for k, v in asdict(target).items() if k != "cluster"
                             and not (k == "start_offset" and v is None)},
                     dry_run=dry_run,
                     outcome=outcome)
    session.add(row)
    session.commit()
    return row.id


def audit_refused(session: Session, *, client: str, reason: str, throttled: bool) -> int:
    """A refused admin attempt (no token, a wrong one): who tried, from where; nothing reached Kafka (the
    request's body is not read before the token is checked, so the row names no target)."""
    outcome = f"refused: {reason}" + ("; client throttled (429) until its window ends" if throttled else "")
    row = AdminAudit(at=datetime.now(timezone.utc), actor=f"unauthenticated {client}"[:255],
                     action="abort_transaction", cluster="", target={}, dry_run=True, outcome=outcome)
    session.add(row)
    session.commit()
    return row.id


def abort(session: Session, abort_transaction: AbortTransaction, config: ClusterConfig, target: AbortTarget, *,
          dry_run: bool, actor: str) -> AbortDone:
    """Check (dry run) or write the ABORT marker, then audit; for callers that may block (the CLI)."""
    result, outcome = call_kafka(abort_transaction, config, target, dry_run)
    return AbortDone(result, outcome, audit(session, actor=actor, target=target, dry_run=dry_run, outcome=outcome))
