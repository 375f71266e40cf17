"""The composition root: builds every long-lived object once and owns their lifecycle.

Nothing else in txnwatch holds process-wide state; the API reaches these objects
through ``app.state.runtime`` and FastAPI dependencies.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from prometheus_client.registry import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.config import Settings
from txnwatch.leader import Leadership, SingleInstance
from txnwatch.state import LatestState
from txnwatch.store.db import make_engine, make_sessionmaker

log = logging.getLogger(__name__)


class SchemaNotReady(RuntimeError):
    """The database schema is missing or behind; the message says which command fixes it."""


@dataclass
class Runtime:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    state: LatestState
    leadership: Leadership = field(default_factory=SingleInstance)
    registry: CollectorRegistry | None = None
    starters: list[Callable[[], None]] = field(default_factory=list)
    stoppers: list[Callable[[], None]] = field(default_factory=list)

    def start(self) -> None:
        for start in self.starters:
            start()

    def stop(self) -> None:
        for stop in reversed(self.stoppers):
            try:
                stop()
            except Exception:
                log.exception("error while stopping")
        self.engine.dispose()


def ensure_schema(settings: Settings) -> None:
    """SQLite (the embedded default) migrates itself; PostgreSQL is migrated by `txnwatch migrate` (a Helm hook)."""
    from alembic.script import ScriptDirectory

    from txnwatch.store.migrate import alembic_config, current, upgrade

    if settings.database_url.startswith("sqlite"):
        upgrade(settings.database_url)
        return
    head = ScriptDirectory.from_config(alembic_config(settings.database_url)).get_current_head()
    have = current(settings.database_url)
    if have != head:
        raise SchemaNotReady(f"database schema is at {have or 'nothing'}, expected {head}: run `txnwatch migrate`")


def build_runtime(settings: Settings, *, collect: bool = True) -> Runtime:
    engine = make_engine(settings.database_url)
    runtime = Runtime(settings=settings, engine=engine, sessions=make_sessionmaker(engine),
                      state=LatestState([c.name for c in settings.clusters]))
    if collect:
        from txnwatch.wiring import wire_collection

        wire_collection(runtime)
    return runtime
