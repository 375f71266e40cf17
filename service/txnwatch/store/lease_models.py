"""Fleet tables: which replicas are alive and which replica watches which cluster.

Only PostgreSQL deployments use them (SQLite is single-instance), but the schema is
the same on both so one migration chain serves every backend.  Every time in these
rows is written from the database's own clock (``now()``), never a replica's, so
replicas with skewed clocks still agree on who may take a lease.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, String
from sqlalchemy.orm import Mapped, mapped_column

from txnwatch.store.models import Base


class FleetReplica(Base):
    """A replica's heartbeat; live replicas (``expires_at`` in the future) share the clusters between them."""

    __tablename__ = "fleet_replicas"

    replica_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    host: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime]
    heartbeat_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class ClusterLease(Base):
    """One cluster's lease: its holder polls and pages for it until ``deadline``.

    ``epoch`` goes up by one every time the lease changes hands: it is the fencing token
    a holder shows on every page and alert write, so a replica that lost the lease
    without noticing is refused.  The cluster ``*`` is the housekeeping lease
    (retention, retired clusters).
    """

    __tablename__ = "cluster_leases"

    cluster: Mapped[str] = mapped_column(String(63), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(128))
    epoch: Mapped[int] = mapped_column(BigInteger, default=0)
    acquired_at: Mapped[datetime | None]
    renewed_at: Mapped[datetime | None]
    deadline: Mapped[datetime]
