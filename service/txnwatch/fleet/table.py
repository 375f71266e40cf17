"""The lease table's SQL (PostgreSQL only): heartbeat, renew, take, give up, and the fencing check.

Every deadline is computed and compared with the database's ``now()``, the one clock
all replicas share; a replica's own clock only ever measures how long ago *it* asked
(see ``fleet.leases``).  A lease is taken with one conditional UPDATE
(``deadline <= now()``): PostgreSQL's row lock makes two takers wait for each other
and re-check the condition, so exactly one wins and its epoch is one higher.

Statements carry a ``statement_timeout`` and ``lock_timeout`` of one renew interval and
the connection a TCP user timeout of one lease, so a database that stops answering
holds the lease thread up for a bounded time; the holder's own deadline does not
depend on it anyway.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine, create_engine, text

from txnwatch.fleet.balance import HOUSEKEEPING, LeaseView
from txnwatch.store.db import normalise_url

HEARTBEAT_KEEP = "1 day"  # dead replicas' heartbeat rows are deleted after this


@dataclass(frozen=True)
class Round:
    """What one heartbeat-and-renew transaction saw."""

    renewed: Mapping[str, int]
    leases: Mapping[str, LeaseView]
    live: frozenset[str]


def lease_engine(url: str, *, lease_s: float, renew_s: float) -> Engine:
    """A small pool of its own: the lease thread must not queue behind the collector's writes."""
    timeout_ms = max(1000, int(lease_s * 1000))
    return create_engine(normalise_url(url), pool_size=2, max_overflow=2, pool_pre_ping=True,
                         pool_timeout=max(1.0, renew_s),
                         connect_args={"connect_timeout": max(2, int(renew_s + 1)),
                                       "tcp_user_timeout": timeout_ms, "keepalives": 1,
                                       "keepalives_idle": max(1, int(renew_s)), "keepalives_interval": 1,
                                       "keepalives_count": 3})


class LeaseTable:
    def __init__(self, engine: Engine, replica_id: str, host: str, *, lease_s: float, renew_s: float) -> None:
        self._engine = engine
        self.replica_id = replica_id
        self._host = host[:255]
        self._lease_s = lease_s
        self._timeout_ms = str(max(200, int(renew_s * 1000)))

    def _begin(self, conn: Connection) -> None:
        conn.execute(text("SELECT set_config('statement_timeout', :ms, true), set_config('lock_timeout', :ms, true)"),
                     {"ms": self._timeout_ms})

    def round(self, clusters: Sequence[str], mine: Collection[str]) -> Round:
        """Heartbeat, renew ``mine`` (those still valid), read every lease and the live replicas; one transaction.

        The heartbeat and the leases get the same deadline (``now()`` is the transaction's
        start), so a dead replica drops out of the live count exactly when its leases expire.
        """
        with self._engine.begin() as conn:
            self._begin(conn)
            conn.execute(text(
                "INSERT INTO fleet_replicas (replica_id, host, started_at, heartbeat_at, expires_at) "
                "VALUES (:me, :host, now(), now(), now() + make_interval(secs => :lease)) "
                "ON CONFLICT (replica_id) DO UPDATE SET heartbeat_at = now(), expires_at = EXCLUDED.expires_at"),
                {"me": self.replica_id, "host": self._host, "lease": self._lease_s})
            renewed = {row.cluster: int(row.epoch) for row in conn.execute(text(
                "UPDATE cluster_leases SET deadline = now() + make_interval(secs => :lease), renewed_at = now() "
                "WHERE holder = :me AND deadline > now() AND cluster = ANY(CAST(:mine AS text[])) RETURNING cluster, epoch"),
                {"me": self.replica_id, "lease": self._lease_s, "mine": list(mine)})}
            known = {row.cluster for row in conn.execute(text("SELECT cluster FROM cluster_leases"))}
            missing = [c for c in [*clusters, HOUSEKEEPING] if c not in known]
            if missing:  # first sight of a cluster: a row that has already expired, so anyone may take it
                conn.execute(text("INSERT INTO cluster_leases (cluster, holder, epoch, deadline) "
                                  "SELECT c, NULL, 0, now() FROM unnest(CAST(:cs AS text[])) AS c "
                                  "ON CONFLICT (cluster) DO NOTHING"), {"cs": missing})
            leases = {row.cluster: LeaseView(row.cluster, row.holder, float(row.expired_for_s))
                      for row in conn.execute(text(
                          "SELECT cluster, holder, EXTRACT(EPOCH FROM now() - deadline) AS expired_for_s "
                          "FROM cluster_leases"))}
            live = frozenset(conn.execute(text(
                "SELECT replica_id FROM fleet_replicas WHERE expires_at > now()")).scalars())
            conn.execute(text(f"DELETE FROM fleet_replicas WHERE expires_at < now() - interval '{HEARTBEAT_KEEP}'"))
        return Round(renewed, leases, live)

    def acquire(self, cluster: str) -> int | None:
        """Take an expired lease; the new epoch, or None if it is still valid (someone else renewed or won)."""
        with self._engine.begin() as conn:
            self._begin(conn)
            epoch = conn.execute(text(
                "UPDATE cluster_leases SET holder = :me, epoch = epoch + 1, acquired_at = now(), renewed_at = now(), "
                "deadline = now() + make_interval(secs => :lease) "
                "WHERE cluster = :c AND deadline <= now() RETURNING epoch"),
                {"me": self.replica_id, "c": cluster, "lease": self._lease_s}).scalar()
        return None if epoch is None else int(epoch)

    def release(self, cluster: str, epoch: int) -> None:
        """Give a lease up now (its deadline becomes ``now()``), only if it is still this term's."""
        with self._engine.begin() as conn:
            self._begin(conn)
            conn.execute(text("UPDATE cluster_leases SET deadline = LEAST(deadline, now()) "
                              "WHERE cluster = :c AND holder = :me AND epoch = :e"),
                         {"c": cluster, "me": self.replica_id, "e": epoch})

    def leave(self, held: Mapping[str, int]) -> None:
        """Shutdown: give every lease up and drop the heartbeat, so the others rebalance at their next round."""
        with self._engine.begin() as conn:
            self._begin(conn)
            for cluster, epoch in held.items():
                conn.execute(text("UPDATE cluster_leases SET deadline = LEAST(deadline, now()) "
                                  "WHERE cluster = :c AND holder = :me AND epoch = :e"),
                             {"c": cluster, "me": self.replica_id, "e": epoch})
            conn.execute(text("DELETE FROM fleet_replicas WHERE replica_id = :me"), {"me": self.replica_id})

    def close(self) -> None:
        self._engine.dispose()

    def valid_epoch(self, cluster: str) -> int | None:
        """The fencing check before a page: this replica's epoch if it holds the lease by the database's clock."""
        with self._engine.begin() as conn:
            self._begin(conn)
            epoch = conn.execute(text("SELECT epoch FROM cluster_leases WHERE cluster = :c AND holder = :me "
                                      "AND deadline > now()"), {"c": cluster, "me": self.replica_id}).scalar()
        return None if epoch is None else int(epoch)


def holds_in(conn: Connection, cluster: str, replica_id: str, epoch: int) -> bool:
    """The fencing check inside a caller's transaction (alert evaluation).

    ``FOR SHARE`` keeps the row as it is until that transaction ends: a taker's UPDATE
    waits for the commit, so alert state written under an epoch is never interleaved
    with the next holder's.
    """
    return conn.execute(text("SELECT 1 FROM cluster_leases WHERE cluster = :c AND holder = :me AND epoch = :e "
                             "AND deadline > now() FOR SHARE"),
                        {"c": cluster, "me": replica_id, "e": epoch}).first() is not None
