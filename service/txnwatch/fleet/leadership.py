"""Who polls and pages for which cluster: per-cluster leases on PostgreSQL, everything locally on SQLite.

With several replicas on one PostgreSQL, each cluster has its own lease with a
deadline and an epoch (``txnwatch.fleet``): the replicas share the clusters between
them, a holder that cannot renew goes silent before its deadline, and a follower takes
a lease only once the deadline has passed by the database's clock.  The old single
advisory lock could not promise that: a leader cut off from the database led on while
the database released its lock to a follower, and both paged.

SQLite mode is single-instance: one process owns the file and holds every cluster.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Protocol

from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from txnwatch.core.config import FleetConfig


class Leadership(Protocol):
    def term(self, cluster: str) -> int | None: ...
    def holds(self, cluster: str) -> bool: ...
    def held(self) -> list[str]: ...
    def is_leader(self) -> bool: ...
    def fence(self, session: Session | Connection, cluster: str) -> None: ...
    def send_window(self, cluster: str | None) -> AbstractContextManager[float | None]: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


class SingleInstance:
    """SQLite: one process owns the file; it holds every cluster, always, in one term."""

    def __init__(self, clusters: Sequence[str] = ()) -> None:
        self._clusters = list(clusters)

    def term(self, cluster: str) -> int | None:
        return 1

    def holds(self, cluster: str) -> bool:
        return True

    def held(self) -> list[str]:
        return list(self._clusters)

    def is_leader(self) -> bool:
        return True

    def fence(self, session: Session | Connection, cluster: str) -> None:
        pass

    @contextmanager
    def send_window(self, cluster: str | None) -> Iterator[float | None]:
        yield math.inf

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass


def leadership_for(database_url: str, clusters: Sequence[str], fleet: FleetConfig) -> Leadership:
    """Leases on PostgreSQL (any number of replicas), a single instance on SQLite."""
    from txnwatch.store.db import normalise_url

    if not normalise_url(database_url).startswith("postgresql"):
        return SingleInstance(clusters)
    import socket

    from txnwatch.fleet.leases import FleetLeases, FleetTiming, default_replica_id
    from txnwatch.fleet.table import LeaseTable, lease_engine

    engine = lease_engine(database_url, lease_s=fleet.lease_seconds, renew_s=fleet.renew_seconds)
    table = LeaseTable(engine, fleet.replica_id or default_replica_id(), socket.gethostname(),
                       lease_s=fleet.lease_seconds, renew_s=fleet.renew_seconds)
    return FleetLeases(table, clusters, FleetTiming(fleet.lease_seconds, fleet.renew_seconds, fleet.margin_seconds))
