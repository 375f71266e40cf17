"""The admin action's use case, the same for both doors: audit the intent, ask Kafka, audit the outcome.

The door (the API's route, the CLI's command) has checked who asks (txnwatch.remedy.guard) and built the
command; :func:`execute` then

1. commits the intent (txnwatch.remedy.audit) and, if it cannot, raises :class:`NothingSent`: nothing was
   sent to Kafka, so the action may be asked again once the database takes writes;
2. sends the command (a dry run checks and writes nothing);
3. writes the outcome on the same row.  If that fails the action stands, whatever Kafka did: :class:`Done`
   says so (``unrecorded``) and the doors tell the operator it happened and is not recorded, never to retry.

Without an audit (``audit=None``: the CLI with no database configured) only step 2 runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from txnwatch.core.config import ClusterConfig
from txnwatch.remedy.audit import Audit, AuditUnwritable, Who
from txnwatch.remedy.commands import AdminCalls, Command, Sent

R = TypeVar("R")


class NothingSent(Exception):
    """The intent could not be committed, so nothing was sent to Kafka; ``str()`` says so in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"nothing was sent to Kafka: the audit could not record the intent ({reason}); it is safe "
                         "to retry once the database accepts writes")
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Done(Generic[R]):
    sent: Sent[R]
    #: The audit row (None: not audited, the CLI without a database).
    audit_id: int | None
    #: Why the outcome is not on the audit row (the database failed after Kafka answered); None: it is.
    unrecorded: str | None = None

    @property
    def unrecorded_note(self) -> str | None:
        """What the doors say when the outcome is not recorded; None when it is."""
        if self.unrecorded is None:
            return None
        missing = (f"the audit could not record the outcome ({self.unrecorded}): audit row {self.audit_id} holds "
                   "the intent only")
        if self.sent.acted:
            return f"done on Kafka ({self.sent.outcome}), but {missing}; do not send it again"
        return f"{self.sent.outcome}; {missing}"


def execute(command: Command[R], *, calls: AdminCalls, config: ClusterConfig, dry_run: bool, who: Who,
            audit: Audit | None) -> Done[R]:
    """Blocking (database and Kafka): the API runs it in a worker thread."""
    audit_id = None
    if audit is not None:
        try:
            audit_id = audit.intent(who, command, dry_run=dry_run)
        except AuditUnwritable as exc:
            raise NothingSent(exc.reason) from exc
    sent = command.send(calls, config, dry_run=dry_run)
    if audit is None or audit_id is None:
        return Done(sent, None)
    try:
        audit.outcome(audit_id, sent.outcome)
    except AuditUnwritable as exc:
        return Done(sent, audit_id, exc.reason)
    return Done(sent, audit_id)
