"""The admin audit, written ahead: the intent is committed before anything is sent to Kafka, the outcome after.

Why ahead: written after the call, as it was, a full volume or a database gone away let an ABORT marker be
written with no trace of who asked, and the answer (``503 database unreachable; retry shortly``) sent the
operator to abort again what was already aborted (issue 38 item 4: LSO 0 -> 7, no row).  Now every action is
one row, written twice:

* the **intent**, committed first: who (``actor``: the door and the credential; ``client``: the address the
  request came from, which behind a trusted proxy is the X-Forwarded-For client, as the auth throttle counts
  it; the CLI's user@host), what (``action``, ``cluster``, ``target``, ``dry_run``) and when (``at``).  If it
  cannot be committed, :class:`AuditUnwritable` stops the action before Kafka is asked anything;
* the **outcome**, the same row's update (``outcome``, ``finished_at``), after Kafka answered.

A row whose ``outcome`` is NULL is an action whose outcome is unknown: the process stopped, or the database
failed, between the two writes.  Kafka tells what happened (``kafka-transactions.sh describe-producers``
shows whether the transaction is still open); the row never guesses.

Refused attempts (no admin token, a wrong one) are one row each, written at once (:meth:`Audit.refused`).
An action on the database alone (ending every console session) is one row written in the same transaction as
the action (:meth:`Audit.in_store`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from txnwatch.core.redact import redact
from txnwatch.remedy.commands import Command
from txnwatch.store.models import AdminAudit

#: The width of ``admin_audit.actor`` and ``admin_audit.client``.
TEXT_MAX = 255


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True, slots=True)
class Who:
    """Who asks: ``actor`` is the door and the credential (``api:admin-token``, ``cli:admin-token``,
    ``cli:bootstrap-server``), ``client`` where the request came from (None: not known)."""

    actor: str
    client: str | None


class AuditUnwritable(Exception):
    """The database refused the row or could not be reached; ``reason`` is the driver's first line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def reason_of(exc: SQLAlchemyError) -> str:
    """The driver's own message (without SQLAlchemy's statement and link), its first line, passwords masked."""
    orig = getattr(exc, "orig", None)
    lines = (str(orig) if orig is not None else str(exc)).strip().splitlines()
    return redact(lines[0]) if lines else type(exc).__name__


class Audit:
    """Writes the rows of ``admin_audit``, each in a session (and so a transaction) of its own."""

    def __init__(self, sessions: Callable[[], Session], *, clock: Callable[[], datetime] = _utc_now) -> None:
        self._sessions, self._clock = sessions, clock

    def intent(self, who: Who, command: Command[Any], *, dry_run: bool) -> int:
        """The intent's row, committed: its id.  :class:`AuditUnwritable` when it is not."""
        row = AdminAudit(at=self._clock(), actor=who.actor[:TEXT_MAX], client=_bounded(who.client),
                         action=command.action, cluster=command.cluster, target=command.audit_target(),
                         dry_run=dry_run, outcome=None, finished_at=None)
        return self._commit(row)

    def outcome(self, audit_id: int, outcome: str) -> None:
        """The outcome on the intent's row, committed; :class:`AuditUnwritable` when it is not."""
        try:
            with self._sessions() as session:
                session.execute(update(AdminAudit).where(AdminAudit.id == audit_id)
                                .values(outcome=outcome, finished_at=self._clock()))
                session.commit()
        except SQLAlchemyError as exc:
            raise AuditUnwritable(reason_of(exc)) from exc

    def refused(self, *, client: str | None, counted_as: str, reason: str, throttled: bool,
                action: str = "abort_transaction") -> int:
        """A refused admin attempt (no token, a wrong one): who tried, from where, at which action; nothing was done
        (the request's body is not read before the token is checked, so the row names no target).  ``counted_as``
        is the client as the auth throttle counts it (IPv6 by its /64)."""
        outcome = f"refused: {reason}" + ("; client throttled (429) until its window ends" if throttled else "")
        now = self._clock()
        return self._commit(AdminAudit(at=now, actor=f"unauthenticated {counted_as}"[:TEXT_MAX],
                                       client=_bounded(client), action=action, cluster="", target={},
                                       dry_run=True, outcome=outcome, finished_at=now))

    def in_store(self, who: Who, action: str, change: Callable[[Session, datetime], str]) -> tuple[int, str]:
        """An action on the database alone (no Kafka call: ending every console session), and its row, in one
        transaction: both are committed or neither is, so there is nothing to write ahead of.  ``change`` does the
        action in the session at the given time and returns the outcome line.  Returns (audit id, outcome);
        :class:`AuditUnwritable` when the transaction failed (then nothing was done)."""
        now = self._clock()
        try:
            with self._sessions() as session:
                outcome = change(session, now)
                row = AdminAudit(at=now, actor=who.actor[:TEXT_MAX], client=_bounded(who.client), action=action,
                                 cluster="", target={}, dry_run=False, outcome=outcome, finished_at=now)
                session.add(row)
                session.flush()
                audit_id = row.id
                session.commit()
        except SQLAlchemyError as exc:
            raise AuditUnwritable(reason_of(exc)) from exc
        return audit_id, outcome

    def _commit(self, row: AdminAudit) -> int:
        try:
            with self._sessions() as session:
                session.add(row)
                session.flush()
                audit_id = row.id  # before the commit, which expires the row (reading it again is a query)
                session.commit()
        except SQLAlchemyError as exc:
            raise AuditUnwritable(reason_of(exc)) from exc
        return audit_id


def _bounded(text: str | None) -> str | None:
    return None if text is None else text[:TEXT_MAX]
