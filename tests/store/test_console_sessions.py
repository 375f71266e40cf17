"""The console sessions' table (txnwatch.store.console_sessions) on PostgreSQL and SQLite: what is live, what
ending does, and the bounds a sign-in keeps (expired rows deleted, at most ``most`` rows)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from txnwatch.store import console_sessions as cs

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _start(engine: Engine, session_id: str, at: datetime, **kw: int) -> None:
    with Session(engine) as session:
        cs.start(session, session_id, now=at, expires_at=at + HOUR, **kw)
        session.commit()


def _ids(engine: Engine) -> list[str]:
    with Session(engine) as session:
        return sorted(session.scalars(select(cs.ConsoleSession.id)).all())


def test_live_until_ended_or_expired(engine: Engine) -> None:
    _start(engine, "a", T0)
    _start(engine, "b", T0)
    with Session(engine) as session:
        assert cs.is_live(session, "a", now=T0) and cs.is_live(session, "a", now=T0 + HOUR - timedelta(seconds=1))
        assert not cs.is_live(session, "a", now=T0 + HOUR)
        assert not cs.is_live(session, "nobody", now=T0) and not cs.is_live(session, "x" * 500, now=T0)
        assert cs.end(session, "a", now=T0) and not cs.end(session, "a", now=T0)  # ended once
        session.commit()
        assert not cs.is_live(session, "a", now=T0) and cs.is_live(session, "b", now=T0)
        assert cs.live_count(session, now=T0) == 1
        assert cs.end_all(session, now=T0) == 1 and cs.end_all(session, now=T0) == 0
        session.commit()
        assert not cs.is_live(session, "b", now=T0)


def test_a_sign_in_deletes_the_expired_rows(engine: Engine) -> None:
    _start(engine, "old", T0)
    _start(engine, "ended", T0 + HOUR / 2)
    _start(engine, "new", T0 + HOUR)  # "old" expired at this instant
    assert _ids(engine) == ["ended", "new"]


def test_at_most_the_bound_of_rows_the_oldest_going_first(engine: Engine) -> None:
    for i in range(5):
        _start(engine, f"s{i}", T0 + timedelta(seconds=i), most=3)
    assert _ids(engine) == ["s2", "s3", "s4"]
