"""This replica's leases: which clusters it may poll and page for right now.

The rule that keeps two pagers apart: a lease renewed by a request that *started* at
local time ``t0`` is trusted locally until ``t0 + lease - margin``.  The database set its
deadline to its own ``now() + lease`` later than ``t0``, and nobody may take the lease
before that deadline by the database's clock; so a holder that stops hearing from the
database goes silent ``margin`` before anyone else may begin.  The local check needs
no database, no thread and no signal: ``holds()`` just compares the monotonic clock,
so a replica cut off in the middle of a poll stops by itself.

Pages carry the lease epoch as a fencing token (``send_window``): before each send the
holder checks with the database that its epoch still holds, bounds the send's timeout
by the time its lease has left, and gives a lease up only once its sends in flight
have ended.  Alert writes check the epoch inside their own transaction (``fence``).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from txnwatch.core import threadnames
from txnwatch.fleet.balance import HOUSEKEEPING, plan
from txnwatch.fleet.table import LeaseTable, holds_in
from txnwatch.store.db import Target, connection_of

log = logging.getLogger(__name__)

MIN_SEND_S = 1.0  # a page is not started with less lease than this left


class LeaseLost(RuntimeError):
    """This replica no longer holds the lease (or the epoch moved on): the write is refused."""


@dataclass
class _Term:
    epoch: int
    valid_until: float  # local monotonic seconds
    releasing: bool = False
    released_at: float = 0.0
    sends: int = 0


@dataclass(frozen=True)
class FleetTiming:
    lease_s: float
    renew_s: float
    margin_s: float


@dataclass
class LeaseStats:
    """Own events, for logs and tests: gains, losses (expired without renewal), releases, refused sends."""

    gained: int = 0
    lost: int = 0
    released: int = 0
    refused_sends: int = 0
    failed_rounds: int = 0
    history: list[tuple[str, str, int, float]] = field(default_factory=list)
    """(event, cluster, epoch, at): ``at`` is the local monotonic time the term began being trusted
    ("gained": before the taking request started) or stopped being trusted ("lost", "released")."""


def default_replica_id() -> str:
    return f"{socket.gethostname()[:60]}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


class FleetLeases:
    """Per-cluster leases in PostgreSQL; one instance per process, renewed on its own thread."""

    def __init__(self, table: LeaseTable, clusters: Sequence[str], timing: FleetTiming, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._table = table
        self._clusters = list(clusters)
        self._timing = timing
        self._clock = clock
        self._terms: dict[str, _Term] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._db_ok = True
        self.stats = LeaseStats()

    @property
    def replica_id(self) -> str:
        return self._table.replica_id

    # -- what the rest of the daemon asks ------------------------------------------------------

    def term(self, cluster: str) -> int | None:
        """The epoch this replica holds ``cluster`` under, or None; a new value means a new term."""
        with self._lock:
            t = self._terms.get(cluster)
            return t.epoch if t is not None and not t.releasing and self._clock() < t.valid_until else None

    def holds(self, cluster: str) -> bool:
        return self.term(cluster) is not None

    def held(self) -> list[str]:
        """Clusters held now (not the housekeeping lease)."""
        return [c for c in self._clusters if self.holds(c)]

    def is_leader(self) -> bool:
        """Whether this replica watches anything at all (the `txnwatch_leader` gauge, /readyz role)."""
        return bool(self.held()) or self.holds(HOUSEKEEPING)

    def lease_for(self, cluster: str | None) -> str:
        """Pages of clusters no longer configured (or of unknown origin) belong to the housekeeping lease."""
        return cluster if cluster in self._clusters else HOUSEKEEPING

    def fence(self, session: Target, cluster: str) -> None:
        """Inside a write's transaction (an alert write's Session, the log tail's connection): refuse it unless this
        term still holds, by the database."""
        epoch = self.term(self.lease_for(cluster))
        if epoch is None or not holds_in(connection_of(session), self.lease_for(cluster), self.replica_id, epoch):
            raise LeaseLost(f"replica {self.replica_id} does not hold the lease of {cluster} (epoch {epoch})")

    @contextmanager
    def send_window(self, cluster: str | None) -> Iterator[float | None]:
        """Seconds a page for ``cluster`` may take, or None if this replica must not send it.

        Refused unless the local term has ``MIN_SEND_S`` left *and* the database confirms
        the epoch; the lease is not given up while a send is in flight.
        """
        lease = self.lease_for(cluster)
        with self._lock:
            t = self._terms.get(lease)
            if t is None or t.releasing or t.valid_until - self._clock() < MIN_SEND_S:
                yield None
                return
            t.sends += 1
        try:
            try:
                confirmed = self._table.valid_epoch(lease) == t.epoch
            except Exception as exc:
                log.warning("fencing check for %s failed (%s); not sending", lease, _first_line(exc))
                confirmed = False
            left = t.valid_until - self._clock()
            if not confirmed or left < MIN_SEND_S:
                with self._lock:
                    self.stats.refused_sends += 1
                log.warning("page for %s refused: replica %s no longer holds epoch %d of its lease", cluster,
                            self.replica_id, t.epoch)
                yield None
            else:
                yield left
        finally:
            with self._lock:
                t.sends -= 1

    # -- the lease thread -------------------------------------------------------------------------

    def start(self) -> None:
        """One round at once (so a lone replica polls from its first second), then the thread."""
        self.run_round()
        self._thread = threadnames.thread(self._run, "leases")
        self._thread.start()

    def _run(self) -> None:
        wait = self._timing.renew_s
        while not self._stop.wait(wait):
            wait = self.run_round()

    def run_round(self) -> float:
        """Heartbeat, renew, give up, take; returns seconds until the next round. Never raises."""
        renew_s = self._timing.renew_s
        try:
            return self._round()
        except Exception as exc:
            self.stats.failed_rounds += 1
            if self._db_ok:
                self._db_ok = False
                log.error("fleet: cannot reach the database to renew leases (%s); this replica stops polling and "
                          "paging its clusters %.1fs before their leases end unless it can renew by then",
                          _first_line(exc), self._timing.margin_s)
            self._expire_lost()
            return renew_s

    def _round(self) -> float:
        timing = self._timing
        self._give_up_released()
        started = self._clock()
        with self._lock:
            mine = {c: t.epoch for c, t in self._terms.items() if not t.releasing and started < t.valid_until}
        seen = self._table.round(self._clusters, list(mine))
        if not self._db_ok:
            self._db_ok = True
            log.warning("fleet: the database answers again; renewing leases")
        valid_until = started + timing.lease_s - timing.margin_s
        with self._lock:
            for cluster, epoch in seen.renewed.items():
                t = self._terms.get(cluster)
                if t is not None and t.epoch == epoch and not t.releasing:
                    t.valid_until = valid_until
        self._expire_lost(keep=set(seen.renewed))
        decided = plan(self.replica_id, self._clusters, seen.leases, seen.live, orphan_after_s=2 * timing.renew_s)
        for cluster in decided.release:
            with self._lock:
                t = self._terms.get(cluster)
                if t is not None:
                    t.releasing = True  # stops polling and paging now; the database hears of it next round
                    t.released_at = self._clock()
            log.info("fleet: giving up %s to balance %d clusters over %d replicas", cluster, len(self._clusters),
                     len(seen.live | {self.replica_id}))
        for cluster in decided.acquire:
            asked = self._clock()
            taken = self._table.acquire(cluster)
            if taken is None:
                continue
            with self._lock:
                self._terms[cluster] = _Term(taken, asked + timing.lease_s - timing.margin_s)
                self.stats.gained += 1
                self.stats.history.append(("gained", cluster, taken, asked))
            log.warning("fleet: replica %s now watches %s (lease epoch %d)", self.replica_id, cluster, taken)
        # Wake up right when a lease another replica let lapse can be taken, not a renew interval later.
        soonest = min((-v.expired_for_s for v in seen.leases.values()
                       if v.holder not in (None, self.replica_id) and v.valid and v.holder not in seen.live),
                      default=timing.renew_s)
        return max(0.05, min(timing.renew_s, soonest + 0.05))

    def _give_up_released(self) -> None:
        """Releases decided last round, once no page is in flight (a poll had a round to finish)."""
        with self._lock:
            ready = {c: t for c, t in self._terms.items() if t.releasing and t.sends == 0}
        for cluster, t in ready.items():
            self._table.release(cluster, t.epoch)
            with self._lock:
                if self._terms.get(cluster) is t:
                    del self._terms[cluster]
                self.stats.released += 1
                self.stats.history.append(("released", cluster, t.epoch, t.released_at))

    def _expire_lost(self, keep: set[str] | None = None) -> None:
        """Forget terms that the database did not renew (or whose local time ran out)."""
        now = self._clock()
        with self._lock:
            for cluster, t in list(self._terms.items()):
                if t.releasing:
                    continue
                renewed = keep is not None and cluster in keep
                if not renewed and (keep is not None or now >= t.valid_until) and t.sends == 0:
                    del self._terms[cluster]
                    self.stats.lost += 1
                    self.stats.history.append(("lost", cluster, t.epoch, min(now, t.valid_until)))
                    log.warning("fleet: replica %s lost the lease of %s (epoch %d); it stopped polling and paging "
                                "it", self.replica_id, cluster, t.epoch)

    def stop(self) -> None:
        """Give every lease up and leave the fleet, so the others take over at their next round."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._timing.renew_s + 10)
        with self._lock:
            held = {c: t.epoch for c, t in self._terms.items()}
            self._terms.clear()
        try:
            self._table.leave(held)
        except Exception as exc:
            log.warning("fleet: could not give the leases up (%s); they expire within %.0fs", _first_line(exc),
                        self._timing.lease_s)
        self._table.close()


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return text.splitlines()[0] if text else type(exc).__name__
