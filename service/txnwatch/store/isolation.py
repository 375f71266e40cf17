"""One bad object never poisons a write (issue 23): a refused write is retried in SAVEPOINTs, halving.

Tenants' strings reach the database unchecked (Kafka takes a NUL character in an id, PostgreSQL text does not);
a write that carried one used to fail whole, and the writer retried the same write forever, so nothing of any
tenant was recorded again.  Both writers of history (the poll recorder and the transaction-log tail) retry such
a write here: each group of objects in a SAVEPOINT, a refused group halved until the refused objects are alone.
k bad objects among n cost O(k log n) statements, and only in a write that has them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from sqlalchemy.exc import DataError, DBAPIError, IntegrityError
from sqlalchemy.orm import Session

from txnwatch.core.logbudget import describe
from txnwatch.store.health import StoreHealth

log = logging.getLogger(__name__)

Item = TypeVar("Item")

#: A refused object is logged at most this often per kind: a tenant's bad id comes back every poll.
REJECTED_LOG_EVERY_S = 60.0


def refused_data(exc: BaseException) -> bool:
    """The database refused what it was given (a value too long, a NUL in text, an index row too big, a
    constraint), as opposed to being unreachable or failing: only then does writing less help."""
    if not isinstance(exc, DBAPIError) or exc.connection_invalidated:
        return False
    if isinstance(exc, (DataError, IntegrityError)):
        return True
    sqlstate = getattr(exc.orig, "sqlstate", None) or ""
    return sqlstate[:2] in ("22", "23", "54")  # data exception, integrity violation, program limit exceeded


class Rejections:
    """Counts refused objects in the store's health (``txnwatch_store_rejected_objects_total{kind,reason}``) and
    logs them at most once a minute per kind.  One per writer thread."""

    def __init__(self, health: StoreHealth, clock: Callable[[], float] = time.monotonic) -> None:
        self._health = health
        self._clock = clock
        self._logged: dict[str, float] = {}

    def isolate(self, session: Session, kind: str, items: Sequence[Item], write: Callable[[list[Item]], None], *,
                check_only: bool = False) -> list[tuple[Item, str]]:
        """Write ``items`` in SAVEPOINTs, halving a refused part; returns the refused items with the database's
        reason.  ``check_only``: roll every part back (the caller then writes the accepted ones in one go, e.g.
        to keep a step whole)."""
        refused: list[tuple[Item, str]] = []
        parts = [list(items)]
        while parts:
            part = parts.pop()
            savepoint = session.begin_nested()
            try:
                write(part)
            except DBAPIError as exc:
                if not refused_data(exc):
                    raise
                savepoint.rollback()
                if len(part) > 1:
                    half = len(part) // 2
                    parts += [part[half:], part[:half]]
                    continue
                refused.append((part[0], self.rejected(kind, exc)))
                continue
            if check_only:
                savepoint.rollback()
            else:
                savepoint.commit()
        return refused

    def rejected(self, kind: str, exc: DBAPIError) -> str:
        """Counts and (at most once a minute per kind) logs one refused object; returns the reason label."""
        cause = exc.orig if exc.orig is not None else exc
        reason = type(cause).__name__
        self._health.rejected(kind, reason)
        now = self._clock()
        if now - self._logged.get(kind, -REJECTED_LOG_EVERY_S) >= REJECTED_LOG_EVERY_S:
            self._logged[kind] = now
            log.warning("the database refused a %s object (%s); set aside, the rest of the write is recorded "
                        "(counted in txnwatch_store_rejected_objects_total, logged at most once a minute per kind)",
                        kind, describe(cause))
        return reason
