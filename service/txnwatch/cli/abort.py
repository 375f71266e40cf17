"""`txnwatch abort`: end one open transaction the way `kafka-transactions.sh abort` does, or by its transactional
id the way Kafka 4.1's `kafka-transactions.sh forceTerminateTransaction --transactionalId X` does.

Two doors, one action (txnwatch.remedy, shared with `POST /api/v1/admin/abort`):

* ``--bootstrap-server`` needs no config file, like Kafka's own tool: the operator's own
  network access and Kafka ACLs are the guard, exactly as for ``kafka-transactions.sh``.
  The transaction is named by ``--start-offset`` (what the console and ``txnwatch hanging``
  print) or by producer id and epoch, on its partition; or by ``--transactional-id`` alone (Kafka 4.1+,
  refused on older clusters with the partition abort named instead).  When a database is configured (``--config``,
  ``TXNWATCH_CONFIG`` or ``TXNWATCH_DATABASE_URL``) the call is audited there too.
* ``--cluster``/``--config`` uses txnwatch's own credentials for a configured cluster, so it
  passes the API's guard (``api.admin_enabled`` and the admin token) and is always audited.

Audited means written ahead: the intent is committed before Kafka is asked anything, and if it
cannot be, nothing is sent and the command exits ``NOT_AUDITED`` (6) with one line saying so.
Either way it is a dry run unless ``--execute`` is given: an ABORT marker cannot be undone.
The command is a small unit: the Kafka calls, the audit and the clock are passed in, so it is
tested without a terminal or a broker.
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from txnwatch.core import exitcodes
from txnwatch.core.config import ClusterConfig
from txnwatch.core.model import TerminateOutcome
from txnwatch.remedy import execute as remedy
from txnwatch.remedy.audit import Audit, Who
from txnwatch.remedy.commands import AbortById, AbortPartition, AdminCalls


@dataclass(frozen=True)
class AbortReport:
    exit_code: int
    text: str
    warnings: tuple[str, ...] = ()


def operator() -> str:
    """Who runs the command, for the audit's ``client``: user@host (the uid when the user has no name)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # a container's uid without a passwd entry, and no LOGNAME/USER
        user = f"uid {os.getuid()}"
    return f"{user}@{socket.gethostname()}"


def run(cluster: ClusterConfig, command: AbortPartition | AbortById, *, execute: bool, calls: AdminCalls,
        audit: Audit | None, who: Who, now: Callable[[], datetime]) -> AbortReport:
    """Check (dry run) or write the ABORT marker, audited ahead when ``audit`` is given; a two-column report."""
    from txnwatch.cli import tables
    from txnwatch.core import humanize

    if isinstance(command, AbortById):
        return _run_by_id(cluster, command, execute=execute, calls=calls, audit=audit, who=who, now=now)
    try:
        done = remedy.execute(command, calls=calls, config=cluster, dry_run=not execute, who=who, audit=audit)
    except remedy.NothingSent as exc:
        return AbortReport(exitcodes.NOT_AUDITED, "", (f"txnwatch: {exc}",))
    sent, note = done.sent, done.unrecorded_note
    result = sent.result
    audit_line = _audit_line(done)
    producer = (f"id {result.producer_id}, epoch {result.producer_epoch}"
                if result is not None and result.producer_id >= 0 else
                f"id {command.producer_id}, epoch {command.producer_epoch}" if command.producer_id is not None
                else f"the one whose transaction starts at offset {command.start_offset}")
    rows: list[tuple[str, object]] = [
        ("cluster", cluster.name), ("partition", f"{command.topic}-{command.partition}"), ("producer", producer),
        ("mode", "execute: ABORT marker written if allowed" if execute else "dry run (add --execute to abort)"),
        ("outcome", sent.outcome), ("audit id", audit_line), ("checked at", humanize.timestamp(now()))]
    if result is not None:
        rows[3:3] = [("leader", result.leader_id), ("start offset", result.txn_start_offset),
                     ("coordinator epoch", result.coordinator_epoch)]
    code = (exitcodes.CLUSTER_UNREACHABLE if sent.unreachable
            else exitcodes.FOUND_OR_FAILED if sent.refused else exitcodes.OK)
    return AbortReport(code, tables.render(("", ""), rows), (f"txnwatch: {note}",) if note is not None else ())


def _audit_line(done: remedy.Done[Any]) -> object:
    note = done.unrecorded_note
    return ("not audited (no database configured)" if done.audit_id is None else
            done.audit_id if note is None else f"{done.audit_id} (the intent only: outcome not recorded)")


def _run_by_id(cluster: ClusterConfig, command: AbortById, *, execute: bool, calls: AdminCalls, audit: Audit | None,
               who: Who, now: Callable[[], datetime]) -> AbortReport:
    """The abort by transactional id (forceTerminateTransaction): what the coordinator described, what it did."""
    from txnwatch.cli import tables
    from txnwatch.core import humanize

    try:
        done = remedy.execute(command, calls=calls, config=cluster, dry_run=not execute, who=who, audit=audit)
    except remedy.NothingSent as exc:
        return AbortReport(exitcodes.NOT_AUDITED, "", (f"txnwatch: {exc}",))
    sent, note = done.sent, done.unrecorded_note
    result: TerminateOutcome | None = sent.result
    rows: list[tuple[str, object]] = [("cluster", cluster.name), ("transactional id", command.transactional_id)]
    if result is not None:
        if result.lowest_release is not None:
            rows.append(("oldest broker", f"Kafka {result.lowest_release}"))
        if result.coordinator_id is not None:
            rows.append(("coordinator", result.coordinator_id))
        if result.state is not None:
            rows += [("state", result.state), ("producer", f"id {result.producer_id}, epoch {result.producer_epoch}"),
                     ("partitions", ", ".join(f"{tp.topic}-{tp.partition}" for tp in result.partitions) or "none")]
    rows += [("mode", "execute: its coordinator aborts it and fences its producer if allowed" if execute
              else "dry run (add --execute to abort)"), ("outcome", sent.outcome)]
    if result is not None and result.new_producer_epoch is not None:
        rows.append(("now", f"producer id {result.new_producer_id}, epoch {result.new_producer_epoch}"))
    rows += [("audit id", _audit_line(done)), ("checked at", humanize.timestamp(now()))]
    code = (exitcodes.CLUSTER_UNREACHABLE if sent.unreachable
            else exitcodes.FOUND_OR_FAILED if sent.refused else exitcodes.OK)
    return AbortReport(code, tables.render(("", ""), rows), (f"txnwatch: {note}",) if note is not None else ())
