"""Ending every console session at once, without rotating the read token: one use case for the API and the CLI.

Rotating ``api.read_token`` ends every session too, but also every scraper's and API client's access (issue 38
item 5). This ends the sessions alone: each live row of txnwatch.store.console_sessions is marked ended, so every
worker and replica refuses those cookies from their next request, and the audit row (``action``
``end_console_sessions``, who, from where, how many) is written in the same transaction. Sessions started
afterwards are not affected.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from txnwatch.remedy.audit import Audit, Who
from txnwatch.store import console_sessions

ACTION = "end_console_sessions"


@dataclass(frozen=True, slots=True)
class Ended:
    """How many sessions were live and are now ended, and the audit row that says so."""

    count: int
    audit_id: int
    outcome: str


def end_every_session(audit: Audit, who: Who) -> Ended:
    """Ends every live console session; :class:`~txnwatch.remedy.audit.AuditUnwritable` when the database
    failed (then nothing was ended)."""
    ended = 0

    def change(session: Session, now: datetime) -> str:
        nonlocal ended
        ended = console_sessions.end_all(session, now=now)
        return f"ended {ended} console session{'' if ended == 1 else 's'}"

    audit_id, outcome = audit.in_store(who, ACTION, change)
    return Ended(ended, audit_id, outcome)
