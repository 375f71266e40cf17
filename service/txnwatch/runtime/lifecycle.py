"""What the composition root (:func:`txnwatch.runtime.wiring.build_runtime`) hands the server and the API.

A :class:`Runtime` is built whole, once, and never patched afterwards: every
long-lived object is a field, and everything that has a lifecycle is a
:class:`Service` in one ordered tuple, started in order and stopped in reverse
(Burrow's coordinators: what others depend on starts first and stops last).
The API reaches it through ``app.state.runtime`` and ``txnwatch.serve.api.deps``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client.registry import CollectorRegistry
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.core.config import Settings
from txnwatch.core.views import LatestState
from txnwatch.fleet.leadership import Leadership
from txnwatch.metrics.auth_failures import AuthFailureMetrics
from txnwatch.metrics.exposition import ExpositionSource
from txnwatch.remedy.commands import AdminCalls
from txnwatch.store.health import StoreHealth

log = logging.getLogger(__name__)


class SchemaNotReady(RuntimeError):
    """The database schema is missing or behind; the message says which command fixes it."""


def _nothing() -> None:
    return None


@dataclass(frozen=True)
class Service:
    """One part of the daemon with a lifecycle: ``start`` must return promptly (threads are the part's own)."""

    name: str
    start: Callable[[], object]
    stop: Callable[[], None] = _nothing


@dataclass(frozen=True)
class Runtime:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    #: Autocommit sessions for the API's reads (txnwatch.store.db.make_read_sessionmaker).
    read_sessions: sessionmaker[Session]
    state: LatestState
    leadership: Leadership
    registry: CollectorRegistry
    store_health: StoreHealth
    exposition: ExpositionSource
    #: The admin actions' Kafka calls (txnwatch.remedy), wired to kafka/: the API needs no Kafka import to call them.
    admin_calls: AdminCalls
    #: ``txnwatch_auth_failures_total``, counted by the API's throttle (txnwatch.serve.api.throttle, built with
    #: the app) in this process or, with API workers, in shared memory this process renders.
    auth_failures: AuthFailureMetrics
    services: tuple[Service, ...] = ()
    #: Called once per API request before it reads ``state``, ``leadership``, ``store_health`` or ``exposition``:
    #: an API worker process reloads there what the collector process published (txnwatch.runtime.publication).
    refresh: Callable[[], None] = _nothing
    #: Why the collector behind this API cannot be trusted now (an API worker: the collector process stopped
    #: publishing); /readyz lists these among its reasons.
    collector_problems: Callable[[], list[str]] = list
    _started: list[Service] = field(default_factory=list, init=False, repr=False, compare=False)

    def start(self) -> None:
        """Starts the services in order; if one fails, those already started are stopped again, in reverse."""
        for service in self.services:
            try:
                service.start()
            except Exception:
                log.exception("service %s failed to start; stopping the ones started before it", service.name)
                self._stop_started()
                raise
            self._started.append(service)

    def stop(self) -> None:
        self._stop_started()
        self.engine.dispose()

    def _stop_started(self) -> None:
        while self._started:
            service = self._started.pop()
            try:
                service.stop()
            except Exception:
                log.exception("error while stopping %s", service.name)


def ensure_schema(settings: Settings) -> None:
    """SQLite (the embedded default) migrates itself; PostgreSQL is migrated by `txnwatch migrate` (a Helm hook).

    Done in a child process (txnwatch.store.schema_check) so Alembic and Mako never stay resident in the daemon.
    """
    from txnwatch.store.schema_check import NOT_AT_HEAD, READY, check_in_child

    status, reason = check_in_child(settings.database_url)
    if status == NOT_AT_HEAD:
        raise SchemaNotReady(reason)
    if status != READY:
        raise RuntimeError(reason or f"the schema check exited {status}")
