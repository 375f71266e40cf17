"""A pooled PostgreSQL connection that died while idle is replaced before use; busy ones are not pinged."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from txnwatch.store.db import make_engine, ping_when_idle


def _kill_backends_of(engine: Engine, killer: Engine) -> int:
    """Terminates the server processes behind ``engine``'s pooled connections, as a restart or a proxy would."""
    with engine.connect() as conn:
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
    with killer.connect() as conn:
        return int(conn.execute(text("SELECT count(*) FROM (SELECT pg_terminate_backend(:pid)) t"),
                                {"pid": pid}).scalar_one())


def test_a_connection_killed_while_idle_is_replaced_at_checkout(postgres_url: str) -> None:
    engine = make_engine(postgres_url, pool_size=1, max_overflow=0, pool_pre_ping=False)
    ping_when_idle(engine, idle_s=0.0)  # every checkout counts as idle
    killer = make_engine(postgres_url)
    try:
        assert _kill_backends_of(engine, killer) == 1
        with engine.connect() as conn:  # the dead connection is found at checkout and replaced
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()
        killer.dispose()


def test_without_the_idle_ping_the_dead_connection_fails_the_request(postgres_url: str) -> None:
    """The check above can fail: with no ping at all the first statement on the dead connection errors."""
    engine = make_engine(postgres_url, pool_size=1, max_overflow=0, pool_pre_ping=False)
    killer = make_engine(postgres_url)
    try:
        assert _kill_backends_of(engine, killer) == 1
        try:
            with engine.connect() as conn:
                conn.execute(text("SELECT 1"))
        except OperationalError:
            pass
        else:
            raise AssertionError("a statement on a killed connection succeeded without a ping")
    finally:
        engine.dispose()
        killer.dispose()


def _pings(engine: Engine) -> list[int]:
    """Counts the dialect's pings on ``engine`` (the pool calls ``engine.dialect.do_ping``)."""
    pings: list[int] = []
    original = engine.dialect.do_ping

    def counted(dbapi_connection: Any) -> bool:
        pings.append(1)
        return original(dbapi_connection)

    engine.dialect.do_ping = counted  # type: ignore[method-assign]
    return pings


def test_only_idle_connections_are_pinged(postgres_url: str) -> None:
    busy = make_engine(postgres_url, pool_size=1, max_overflow=0)  # the default: ping after 10 s idle
    idle = make_engine(postgres_url, pool_size=1, max_overflow=0, pool_pre_ping=False)
    ping_when_idle(idle, idle_s=0.0)
    try:
        counts = {}
        for name, engine in (("busy", busy), ("idle", idle)):
            pings = _pings(engine)
            for _ in range(20):
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
            counts[name] = len(pings)
        assert counts == {"busy": 0, "idle": 19}  # the first checkout opens the connection: nothing to ping
    finally:
        busy.dispose()
        idle.dispose()
