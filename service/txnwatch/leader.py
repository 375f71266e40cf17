"""Leader election: with several replicas, exactly one polls Kafka, evaluates alerts and pages.

PostgreSQL's session-level advisory lock is the lease: it is held by one database
session and released by the server the moment that session ends, so a crashed or
killed leader frees it without any timeout of ours; a network partition frees it
when TCP keepalives give up on the session.  Followers try again on every refresh
and so take over within one refresh interval.  SQLite mode is single-instance and
always leads.

A leader that loses its session because the database is unreachable keeps leading
(polling, buffering what it cannot write) until it can ask again: the database being
down is no reason to stop watching Kafka, and nobody else can take the lock meanwhile.
When the database answers, it retakes the lock or, if another replica got there
first, steps down.
"""

from __future__ import annotations

import logging
import threading
import zlib
from typing import Protocol

from sqlalchemy import Connection, Engine, text

log = logging.getLogger(__name__)

LOCK_NAMESPACE = "txnwatch-leader"


class Leadership(Protocol):
    def is_leader(self) -> bool: ...
    def refresh(self) -> bool: ...
    def release(self) -> None: ...


class SingleInstance:
    """SQLite: one process owns the file; there is nobody to elect."""

    def is_leader(self) -> bool:
        return True

    def refresh(self) -> bool:
        return True

    def release(self) -> None:
        pass


class AdvisoryLockLeadership:
    """Holds ``pg_try_advisory_lock`` on a dedicated connection while leading."""

    def __init__(self, engine: Engine, name: str = LOCK_NAMESPACE,
                 on_change: "callable[[bool], None] | None" = None) -> None:  # type: ignore[valid-type]
        self._engine = engine
        self._key = zlib.crc32(name.encode()) - 2**31  # a signed 32-bit key, stable across processes
        self._conn: Connection | None = None
        self._leader = False
        self._degraded = False
        self._lock = threading.Lock()
        self._on_change = on_change

    def is_leader(self) -> bool:
        return self._leader

    def refresh(self) -> bool:
        """Confirm the lease (the session is alive) or try to take it; never raises."""
        with self._lock:
            was = self._leader
            try:
                if self._leader and self._conn is not None:
                    try:
                        self._conn.execute(text("SELECT 1"))
                    except Exception:
                        self._drop_connection()  # the session died; ask again on a fresh one right away
                if self._conn is None or not self._leader:
                    self._leader = self._try_lock()
                self._degraded = False
            except Exception as exc:
                self._drop_connection()
                if self._leader and not self._degraded:
                    self._degraded = True
                    log.error("cannot reach the database to confirm the leader lock (%s); leading on until it "
                              "answers again", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            if was != self._leader:
                log.warning("this replica is now %s", "the leader" if self._leader else "a follower")
                if self._on_change is not None:
                    self._on_change(self._leader)
            return self._leader

    def _try_lock(self) -> bool:
        if self._conn is None:
            self._conn = self._engine.connect()
        got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self._key}).scalar()
        self._conn.commit()
        return bool(got)

    def release(self) -> None:
        with self._lock:
            if self._conn is not None and self._leader:
                try:
                    self._conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": self._key})
                    self._conn.commit()
                except Exception:
                    log.debug("unlock failed; closing the session releases it anyway", exc_info=True)
            self._leader = False
            self._drop_connection()

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                pass


def leadership_for(engine: Engine) -> Leadership:
    return AdvisoryLockLeadership(engine) if engine.dialect.name == "postgresql" else SingleInstance()
