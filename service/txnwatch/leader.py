"""Leader election: with several replicas, exactly one polls Kafka, evaluates alerts and pages.

PostgreSQL's session-level advisory lock is the lease: it is held by one database
session and released by the server the moment that session ends, so a crashed or
killed leader frees it without any timeout of ours; a network partition frees it
when TCP keepalives give up on the session.  Followers try again on every refresh
and so take over within one refresh interval.  SQLite mode is single-instance and
always leads.
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
        self._lock = threading.Lock()
        self._on_change = on_change

    def is_leader(self) -> bool:
        return self._leader

    def refresh(self) -> bool:
        """Confirm the lease (the session is alive) or try to take it; never raises."""
        with self._lock:
            was = self._leader
            try:
                if self._leader:
                    assert self._conn is not None
                    self._conn.execute(text("SELECT 1"))
                else:
                    if self._conn is None:
                        self._conn = self._engine.connect()
                    got = self._conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": self._key}).scalar()
                    self._conn.commit()
                    self._leader = bool(got)
            except Exception as exc:
                if self._leader:
                    log.error("lost leadership: the session holding the lock failed (%s: %s)",
                              type(exc).__name__, exc)
                self._leader = False
                self._drop_connection()
            if was != self._leader:
                log.warning("this replica is now %s", "the leader" if self._leader else "a follower")
                if self._on_change is not None:
                    self._on_change(self._leader)
            return self._leader

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
