"""Which clusters a replica should take or give up this round: a pure function of the lease table.

Every replica runs the same rule on the same table, so the fleet converges without
talking: each live replica aims at its fair share, ``ceil(clusters / live replicas)``,
gives up one cluster per round while it holds more and another live replica holds
less, and takes expired leases up to its share.  Which expired lease a replica
reaches for first is ordered by rendezvous hashing (highest ``hash(cluster, replica)``
first), so replicas racing for the same free leases mostly want different ones and
the database's row lock settles the rest.

Safety never rests on this module: a lease can only be taken once its deadline has
passed by the database's clock (see ``fleet.table``).  Balance is liveness: a lease
left expired for ``orphan_after_s`` is taken by anyone, over its share, so a cluster
is never left unwatched because the live count was momentarily wrong.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

HOUSEKEEPING = "*"
"""The fleet-wide lease: retention, retired clusters, pages of clusters no longer configured.
Not a valid cluster name (config rejects '*'), not counted in the shares."""


@dataclass(frozen=True)
class LeaseView:
    """One row of the lease table as of the database's ``now()``."""

    cluster: str
    holder: str | None
    expired_for_s: float
    """Seconds since the deadline passed; negative while the lease is still valid."""

    @property
    def valid(self) -> bool:
        return self.holder is not None and self.expired_for_s < 0


@dataclass(frozen=True)
class Plan:
    acquire: tuple[str, ...]
    release: tuple[str, ...]


def fair_share(clusters: int, live_replicas: int) -> int:
    """The most clusters one replica should hold: ``ceil(clusters / live replicas)``."""
    return math.ceil(clusters / max(1, live_replicas))


def preference(cluster: str, replica: str) -> int:
    """Rendezvous score: stable across processes (unlike ``hash``), spread across replicas."""
    return int.from_bytes(hashlib.sha256(f"{cluster}\0{replica}".encode()).digest()[:8], "big")


def plan(me: str, clusters: Sequence[str], leases: Mapping[str, LeaseView], live: Collection[str], *,
         orphan_after_s: float) -> Plan:
    """The leases ``me`` should try to take and give up now.

    ``clusters`` are the configured ones (without the housekeeping lease); a cluster
    missing from ``leases`` has never been leased and counts as expired long ago.
    """
    replicas = set(live) | {me}
    share = fair_share(len(clusters), len(replicas))
    held: dict[str, list[str]] = {r: [] for r in replicas}
    free: list[str] = []
    for cluster in clusters:
        view = leases.get(cluster)
        if view is None or not view.valid:
            free.append(cluster)
        elif view.holder in held:
            held[view.holder].append(cluster)
        # else: held by a replica whose heartbeat lapsed; its lease runs out by itself shortly
    mine = sorted(held[me], key=lambda c: preference(c, me))
    release: tuple[str, ...] = ()
    if len(mine) > share and any(len(held[r]) < share for r in replicas if r != me):
        release = (mine[0],)  # the one I like least; one per round so the fleet never thrashes
    room = max(0, share - len(mine))
    by_preference = sorted(free, key=lambda c: preference(c, me), reverse=True)
    acquire = by_preference[:room]
    acquire += [c for c in by_preference[room:] if _expired_for(leases, c) >= orphan_after_s]
    housekeeping = leases.get(HOUSEKEEPING)
    if housekeeping is None or not housekeeping.valid:
        acquire.append(HOUSEKEEPING)
    return Plan(acquire=tuple(acquire), release=release)


def _expired_for(leases: Mapping[str, LeaseView], cluster: str) -> float:
    view = leases.get(cluster)
    return math.inf if view is None else view.expired_for_s
