"""Engines and sessions: the one place that knows SQLite from PostgreSQL."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import pydantic_core
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.orm import Session, sessionmaker

#: Where a write goes: a Session's transaction, or a Core connection's (the transaction-log tail's writer thread).
Target = Session | Connection


def connection_of(target: Target) -> Connection:
    """The connection ``target`` writes through (a Session's, in its transaction)."""
    return target if isinstance(target, Connection) else target.connection()


def normalise_url(url: str) -> str:
    """Route plain ``postgresql://`` URLs (and the ``postgres://`` alias) to psycopg 3, the driver txnwatch ships
    with."""
    for alias in ("postgresql://", "postgres://"):
        if url.startswith(alias):
            return "postgresql+psycopg://" + url.removeprefix(alias)
    return url


def database_problems(url: str) -> list[str]:
    """What makes ``url`` unusable for the daemon, found without connecting: one line each, for ``config check``,
    ``migrate`` and ``run`` to print before anything else happens.

    An in-memory SQLite database belongs to the connection that opened it: the schema check (a child process),
    the collector's threads, the API and its worker processes would each see an empty database of their own,
    and the first write fails with "no such table" far from its cause. A SQLite path must be creatable and
    writable, with its directory (WAL keeps two more files beside it). PostgreSQL is only known by connecting.
    """
    parsed = make_url(normalise_url(url))
    if parsed.get_backend_name() != "sqlite":
        return []
    database = parsed.database or ""
    if database in ("", ":memory:") or parsed.query.get("mode") == "memory" or "mode=memory" in database:
        return ["an in-memory SQLite database (sqlite://) cannot serve txnwatch: each of its threads and "
                "processes would open an empty database of its own; give a file, e.g. sqlite:///./var/txnwatch.db"]
    problem = _sqlite_path_problem(Path(database.removeprefix("file:").split("?", 1)[0]))
    return [problem] if problem else []


def _sqlite_path_problem(path: Path) -> str | None:
    """Why the SQLite file at ``path`` could not be created or written, if it could not (tried with a temporary
    file where the database's directory would be made, and removed at once)."""
    target = path if path.is_absolute() else Path.cwd() / path
    if target.is_dir():
        return f"SQLite database {str(path)!r} is a directory"
    existing = target.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"SQLite database {str(path)!r}: cannot create its directory: {str(existing)!r} is not a directory"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        return f"SQLite database {str(path)!r}: cannot write in {str(existing)!r}: {exc.strerror or exc}"
    if target.exists() and not os.access(target, os.R_OK | os.W_OK):
        return f"SQLite database {str(path)!r}: the file is not readable and writable by this user"
    return None


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets API readers run while the collector writes; foreign keys are off by default in SQLite.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=5000")
    cursor.close()


def make_engine(url: str, **kwargs: Any) -> Engine:
    url = normalise_url(url)
    # JSON columns (a transaction's partitions, alert labels) parsed by pydantic-core's parser: several
    # times faster than json.loads per value, and a list page parses one per row.
    kwargs.setdefault("json_deserializer", pydantic_core.from_json)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False}, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    kwargs.setdefault("pool_size", 10)
    kwargs.setdefault("max_overflow", 20)
    idle_ping = not kwargs.get("pool_pre_ping", False)
    engine = create_engine(url, connect_args={"connect_timeout": 5}, **kwargs)
    event.listen(engine, "connect", _utc_session)
    if idle_ping:
        ping_when_idle(engine)
    return engine


def _utc_session(dbapi_connection: Any, _record: Any) -> None:
    """Timestamps come back in UTC: psycopg then hands out datetimes already in ``timezone.utc``, which
    UtcDateTime passes through untouched (a list page reads hundreds; converting each from the server's
    zone cost a tenth of the page's CPU). Only an optimisation: UtcDateTime converts whatever arrives,
    e.g. behind a transaction-pooling proxy that drops session settings. No query depends on the session
    zone (txnwatch compares instants, never calendar dates, in SQL)."""
    autocommit = dbapi_connection.autocommit
    dbapi_connection.autocommit = True
    try:
        dbapi_connection.execute("SET TIME ZONE 'UTC'")
    finally:
        dbapi_connection.autocommit = autocommit


#: A pooled connection idle this long is pinged before use; busier ones are used as they are.
IDLE_PING_AFTER_S = 10.0


def ping_when_idle(engine: Engine, idle_s: float = IDLE_PING_AFTER_S) -> None:
    """Ping a pooled connection at checkout only if it sat idle ``idle_s`` or longer.

    ``pool_pre_ping`` pings on every checkout: at hundreds of API requests per second that was a round trip,
    and CPU in both processes, on each of them (issue 18 item 5). Connections that PostgreSQL or a proxy
    closed are the idle ones; a dead one found here is replaced before the caller sees it (the pool retries
    a checkout that raises DisconnectionError with a fresh connection). A connection that dies while busy
    fails its statement, as it did with pre-ping, and SQLAlchemy then invalidates the pool.
    """

    @event.listens_for(engine, "checkin")
    def _stamp(_dbapi_connection: Any, record: Any) -> None:
        record.info["txnwatch_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("txnwatch_idle_since")
        if since is None or time.monotonic() - since < idle_s:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise DisconnectionError(f"pooled connection idle {time.monotonic() - since:.0f}s is dead: {exc}") \
                from exc


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def make_read_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions that only read, in autocommit: no BEGIN/ROLLBACK round trips around an API request, and no
    per-session isolation change. Each statement still sees committed data; the API never needs a snapshot
    across its statements. Same pool as ``engine`` (SQLAlchemy resets the level when a connection returns)."""
    return sessionmaker(engine.execution_options(isolation_level="AUTOCOMMIT"), expire_on_commit=False)
