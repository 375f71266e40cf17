"""Leader election on a real PostgreSQL: one leader, fast takeover, SQLite always leads."""

from __future__ import annotations

import time

from sqlalchemy import text

from txnwatch.leader import AdvisoryLockLeadership, SingleInstance, leadership_for
from txnwatch.store.db import make_engine


def test_exactly_one_leader_and_takeover(postgres_url: str) -> None:
    a_engine, b_engine = make_engine(postgres_url), make_engine(postgres_url)
    changes: list[bool] = []
    a = AdvisoryLockLeadership(a_engine)
    b = AdvisoryLockLeadership(b_engine, on_change=changes.append)
    try:
        assert a.refresh() is True
        assert b.refresh() is False
        assert a.refresh() is True and b.refresh() is False
        assert a._conn is not None
        a_pid = a._conn.execute(text("SELECT pg_backend_pid()")).scalar()
        with b_engine.connect() as admin:  # what a crashed leader looks like to the server
            admin.execute(text("SELECT pg_terminate_backend(:p)"), {"p": a_pid})
        deadline = time.monotonic() + 5  # the server releases the lock as the backend exits
        while not b.refresh() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b.is_leader()
        assert changes == [True]
        assert a.refresh() is False  # notices its session is gone
        assert a.refresh() is False  # and cannot take the lock back
        b.release()
        assert a.refresh() is True
    finally:
        a.release()
        b.release()
        a_engine.dispose()
        b_engine.dispose()


def test_sqlite_is_single_instance(sqlite_url: str) -> None:
    engine = make_engine(sqlite_url)
    assert isinstance(leadership_for(engine), SingleInstance)
    assert leadership_for(engine).refresh()
    engine.dispose()


def test_leader_keeps_leading_through_a_database_outage() -> None:
    import shutil

    from tests.fixtures.postgres_server import start_postgres

    server = start_postgres()
    engine = make_engine(server.url)
    a = AdvisoryLockLeadership(engine)
    try:
        assert a.refresh() is True
        server.stop(mode="fast")
        assert a.refresh() is True and a.is_leader()  # nobody can take the lock while the database is down
        server.start_existing()
        assert a.refresh() is True  # retaken on a fresh session
        other = AdvisoryLockLeadership(make_engine(server.url))
        assert other.refresh() is False
        other.release()
    finally:
        a.release()
        engine.dispose()
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
