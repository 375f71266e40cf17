"""`txnwatch abort`: end one open transaction the way `kafka-transactions.sh abort` does.

Two doors, one action (txnwatch.runtime.admin):

* ``--bootstrap-server`` needs no config file, like Kafka's own tool: the operator's own
  network access and Kafka ACLs are the guard, exactly as for ``kafka-transactions.sh``.
  The transaction is named by ``--start-offset`` (what the console and ``txnwatch hanging``
  print) or by producer id and epoch.  When a database is configured (``--config``,
  ``TXNWATCH_CONFIG`` or ``TXNWATCH_DATABASE_URL``) the call is audited there too.
* ``--cluster``/``--config`` uses txnwatch's own credentials for a configured cluster, so it
  passes the API's guard (``api.admin_enabled`` and the admin token) and is always audited.

Either way it is a dry run unless ``--execute`` is given: an ABORT marker cannot be undone.
The command is a small unit: the Kafka call, the audit session and the clock are passed in,
so it is tested without a terminal or a broker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from txnwatch.core import exitcodes
from txnwatch.core.config import ClusterConfig
from txnwatch.runtime import admin
from txnwatch.runtime.lifecycle import AbortTransaction


@dataclass(frozen=True)
class AbortReport:
    exit_code: int
    text: str
    warnings: tuple[str, ...] = ()


def run(cluster: ClusterConfig, target: admin.AbortTarget, *, execute: bool, abort_transaction: AbortTransaction,
        audit_session: Callable[[], Session] | None, actor: str, now: Callable[[], datetime]) -> AbortReport:
    """Check (dry run) or write the ABORT marker; audit when a database is given; a two-column report."""
    from txnwatch.cli import tables
    from txnwatch.core import humanize

    result, outcome = admin.call_kafka(abort_transaction, cluster, target, dry_run=not execute)
    warnings: list[str] = []
    audit_line: object = "not audited (no database configured)"
    if audit_session is not None:
        try:
            with audit_session() as session:
                audit_line = admin.audit(session, actor=actor, target=target, dry_run=not execute, outcome=outcome)
        except SQLAlchemyError as exc:
            audit_line = "not audited (database error)"
            orig = getattr(exc, "orig", None)  # the driver's own message, without SQLAlchemy's SQL and link
            first = (str(orig) if orig is not None else str(exc)).splitlines()[0]
            warnings.append(f"txnwatch: the abort was not audited: {first}")
    producer = (f"id {result.producer_id}, epoch {result.producer_epoch}"
                if result is not None and result.producer_id >= 0 else
                f"id {target.producer_id}, epoch {target.producer_epoch}" if target.producer_id is not None
                else f"the one whose transaction starts at offset {target.start_offset}")
    rows: list[tuple[str, object]] = [
        ("cluster", cluster.name), ("partition", f"{target.topic}-{target.partition}"), ("producer", producer),
        ("mode", "execute: ABORT marker written if allowed" if execute else "dry run (add --execute to abort)"),
        ("outcome", outcome), ("audit id", audit_line), ("checked at", humanize.timestamp(now()))]
    if result is not None:
        rows[3:3] = [("leader", result.leader_id), ("start offset", result.txn_start_offset),
                     ("coordinator epoch", result.coordinator_epoch)]
    code = (exitcodes.CLUSTER_UNREACHABLE if result is None
            else exitcodes.FOUND_OR_FAILED if result.error is not None else exitcodes.OK)
    return AbortReport(code, tables.render(("", ""), rows), tuple(warnings))
