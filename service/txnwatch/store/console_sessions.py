"""Console sessions on the server: one row per sign-in, so a session can be ended before its cookie expires.

The cookie (txnwatch.serve.api.sessions) stays signed under a key derived from the read token: nobody without
the token can make one, and a rotated token still ends every session at once.  The row adds what a signature
cannot say: that its session was ended.  The read guard accepts a signed cookie only while its row exists, has
no ``ended_at`` and has not expired, so

* ``POST /console/logout`` ends that session on every worker and replica (they share the database), and a copy
  of the cookie taken before stops working with it;
* ``txnwatch sessions end`` and ``POST /api/v1/admin/console-sessions/end`` end every session without rotating
  the token, which also serves every scraper and API client (issue 38 item 5).

Bounded: rows are written only by a sign-in with the right token, and each sign-in deletes the rows whose
expiry has passed (their cookies are refused by their own signed expiry anyway), so the table holds the sign-ins
of one session lifetime, and at most :data:`SESSIONS_MAX` (a script signing in in a loop ends the oldest
sessions, not the disk).  The id is the cookie's random 128-bit id; it is no secret on its own (a
cookie needs the signature too).  Times come from the caller's clock, the one the cookie's expiry was signed with.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, String, and_, delete, func, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from txnwatch.store.models import Base

#: The width of ``console_sessions.id``: the cookie's id is 22 URL-safe base64 characters (16 random bytes).
SESSION_ID_MAX = 64
#: The most rows kept: a sign-in beyond it deletes the oldest (their sessions end).
SESSIONS_MAX = 10_000


class ConsoleSession(Base):
    """One console sign-in: live while ``ended_at`` is NULL and ``expires_at`` is ahead."""

    __tablename__ = "console_sessions"

    id: Mapped[str] = mapped_column(String(SESSION_ID_MAX), primary_key=True)
    started_at: Mapped[datetime]
    expires_at: Mapped[datetime] = mapped_column(index=True)
    #: When logout or "end every session" ended it; NULL while it may be used.
    ended_at: Mapped[datetime | None]


def _live(now: datetime) -> ColumnElement[bool]:
    """A row whose session may still be used at ``now``: not ended, not expired."""
    return and_(ConsoleSession.ended_at.is_(None), ConsoleSession.expires_at > now)


def start(session: Session, session_id: str, *, now: datetime, expires_at: datetime,
          most: int = SESSIONS_MAX) -> None:
    """A new sign-in's row, after deleting the rows already expired and, at ``most`` rows, the oldest (the caller
    commits)."""
    session.execute(delete(ConsoleSession).where(ConsoleSession.expires_at <= now))
    kept = int(session.scalar(select(func.count()).select_from(ConsoleSession)) or 0)
    if kept >= most:
        oldest = select(ConsoleSession.id).order_by(ConsoleSession.started_at, ConsoleSession.id).limit(kept - most + 1)
        session.execute(delete(ConsoleSession).where(ConsoleSession.id.in_(oldest.scalar_subquery())))
    session.add(ConsoleSession(id=session_id, started_at=now, expires_at=expires_at, ended_at=None))


def is_live(session: Session, session_id: str, *, now: datetime) -> bool:
    """The session was started here, is not ended and has not expired."""
    if len(session_id) > SESSION_ID_MAX:
        return False
    found = session.execute(select(ConsoleSession.id).where(ConsoleSession.id == session_id, _live(now))).first()
    return found is not None


def end(session: Session, session_id: str, *, now: datetime) -> bool:
    """Ends one session (logout); whether a live one was ended.  The caller commits."""
    result = session.execute(update(ConsoleSession).where(
        ConsoleSession.id == session_id[:SESSION_ID_MAX], ConsoleSession.ended_at.is_(None))
        .values(ended_at=now))
    return bool(result.rowcount)  # type: ignore[attr-defined]  # an UPDATE's CursorResult has rowcount


def end_all(session: Session, *, now: datetime) -> int:
    """Ends every session still live; how many.  The caller commits."""
    result = session.execute(update(ConsoleSession).where(_live(now)).values(ended_at=now))
    return int(result.rowcount)  # type: ignore[attr-defined]  # an UPDATE's CursorResult has rowcount


def live_count(session: Session, *, now: datetime) -> int:
    """How many sessions may still be used."""
    return int(session.scalar(select(func.count()).select_from(ConsoleSession).where(_live(now))) or 0)
