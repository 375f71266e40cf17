"""Per-cluster leases on a real PostgreSQL: balance, takeover only after the deadline, fencing of stale holders."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select

from tests.fixtures.daemon import wait_for
from tests.fixtures.db_proxy import db_proxy
from txnwatch.alerting.outbox import PENDING, Delivery, OutboxDispatcher
from txnwatch.core.config import FleetConfig
from txnwatch.fleet.balance import HOUSEKEEPING
from txnwatch.fleet.leadership import SingleInstance, leadership_for
from txnwatch.fleet.leases import FleetLeases, FleetTiming, LeaseLost
from txnwatch.fleet.table import LeaseTable, lease_engine
from txnwatch.store import models as m
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.migrate import upgrade

TIMING = FleetTiming(lease_s=3.0, renew_s=0.3, margin_s=1.0)
CLUSTERS = ["east", "west"]


@pytest.fixture
def fleet(postgres_url: str) -> Iterator[Callable[..., FleetLeases]]:
    upgrade(postgres_url)
    made: list[FleetLeases] = []

    def make(name: str, url: str | None = None, clock: Callable[[], float] = time.monotonic) -> FleetLeases:
        engine = lease_engine(url or postgres_url, lease_s=TIMING.lease_s, renew_s=TIMING.renew_s)
        leases = FleetLeases(LeaseTable(engine, name, "test", lease_s=TIMING.lease_s, renew_s=TIMING.renew_s),
                             CLUSTERS, TIMING, clock=clock)
        made.append(leases)
        return leases

    yield make
    for leases in made:
        leases.stop()


def rounds(*replicas: FleetLeases, times: int = 1) -> None:
    for _ in range(times):
        for r in replicas:
            r.run_round()


def test_two_replicas_share_the_clusters_and_take_over_a_silent_one(fleet: Callable[..., FleetLeases]) -> None:
    a = fleet("a")
    rounds(a)
    assert a.held() == CLUSTERS and a.holds(HOUSEKEEPING)  # alone, it watches everything at once
    b = fleet("b")
    rounds(a, b, times=3)
    assert sorted(a.held() + b.held()) == CLUSTERS and len(a.held()) == len(b.held()) == 1
    # a falls silent (as if killed): b may not take a's cluster before its deadline, and must right after.
    (taken,) = a.held()
    silent_at = time.monotonic()
    wait_for(lambda: (b.run_round(), b.holds(taken))[1], TIMING.lease_s + 5, interval=0.05, what="b to take over")
    takeover_s = time.monotonic() - silent_at
    assert TIMING.lease_s - TIMING.renew_s - 0.5 <= takeover_s <= TIMING.lease_s + 2, takeover_s
    assert not a.holds(taken)  # a's own clock told it to stop before b could start
    gained = [h for h in b.stats.history if h[0] == "gained" and h[1] == taken]
    assert gained[-1][2] >= 2  # a new epoch


def test_a_holder_cut_off_from_the_database_stops_before_the_other_takes_over(
        postgres_server: Any, postgres_url: str, fleet: Callable[..., FleetLeases]) -> None:
    with db_proxy(postgres_server.port, 1) as proxy:
        a = fleet("a", proxy.url(postgres_url, 0))
        b = fleet("b")
        rounds(a)
        rounds(a, b, times=3)
        (cluster,) = a.held()
        proxy.cut(0)
        cut_at = time.monotonic()
        while not b.holds(cluster):
            assert time.monotonic() - cut_at < TIMING.lease_s + 10, "b never took over"
            a.run_round()
            b.run_round()
            assert not (a.holds(cluster) and b.holds(cluster)), "two holders at once"
            time.sleep(0.05)
        took_s = time.monotonic() - cut_at
        lost = [h for h in a.stats.history if h[0] == "lost" and h[1] == cluster]
        gained = [h for h in b.stats.history if h[0] == "gained" and h[1] == cluster]
        assert lost and gained
        # The cut-off holder's last trusted moment lies before the taker even asked, by at least most of the margin.
        assert lost[-1][3] < gained[-1][3] - TIMING.margin_s / 2, (lost, gained)
        assert took_s <= TIMING.lease_s + 2
        assert a.held() == [] and sorted(b.held()) == CLUSTERS
        proxy.restore(0)
        def rebalanced() -> bool:
            rounds(a, b)
            return len(a.held()) == len(b.held()) == 1

        wait_for(rebalanced, 30, interval=0.1, what="a to rejoin and the fleet to rebalance")


class Clock:
    def __init__(self) -> None:
        self.frozen: float | None = None

    def __call__(self) -> float:
        return self.frozen if self.frozen is not None else time.monotonic()


class Recorder:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery:
        assert timeout_seconds is not None and timeout_seconds <= TIMING.lease_s  # bounded by the lease left
        self.sent.append(event.dedup_key)
        return Delivery("sent")


def test_a_stale_holder_is_refused_by_the_epoch(fleet: Callable[..., FleetLeases], postgres_url: str) -> None:
    """A holder whose clock stood still (a paused VM) still believes in its lease; the epoch says no."""
    clock = Clock()
    a = fleet("a", clock=clock)
    rounds(a)
    b = fleet("b")
    clock.frozen = time.monotonic()  # a's world stops here: its local term never runs out
    assert a.holds("east") and a.holds("west")
    wait_for(lambda: (b.run_round(), len(b.held()) == 2)[1], TIMING.lease_s + 5, interval=0.05, what="b takes all")
    assert a.holds("east")  # the stale belief

    engine = make_engine(postgres_url)
    sessions = make_sessionmaker(engine)
    now = datetime.now(UTC)
    with sessions.begin() as session:
        session.add(m.OutboxEvent(alert_id=None, channel="pd", action="trigger", dedup_key="east-incident",
                                  payload={"cluster": "east", "incident_key": "east-incident"}, status=PENDING,
                                  attempts=0, created_at=now, next_attempt_at=now))
    stale, holder = Recorder(), Recorder()
    stats = OutboxDispatcher(sessions, {"pd": stale}, guard=a).run_once(now)
    assert stale.sent == [] and stats.fenced == 1 and a.stats.refused_sends == 1
    with pytest.raises(LeaseLost), sessions.begin() as session:
        a.fence(session, "east")  # and its alert writes are refused too
    OutboxDispatcher(sessions, {"pd": holder}, guard=b).run_once(now)
    assert holder.sent == ["east-incident"]
    assert OutboxDispatcher(sessions, {"pd": holder}, guard=b).run_once(now).sent == 0  # once
    engine.dispose()


def test_sqlite_is_single_instance(sqlite_url: str) -> None:
    leadership = leadership_for(sqlite_url, CLUSTERS, FleetConfig())
    assert isinstance(leadership, SingleInstance)
    assert leadership.held() == CLUSTERS and leadership.holds("east") and leadership.term("east")


@pytest.mark.parametrize(("values", "fragment"), [
    pytest.param({"lease_seconds": 5, "renew_seconds": 3, "margin_seconds": 2}, "must exceed", id="no-slack"),
    pytest.param({"margin_seconds": 0}, "greater than 0", id="no-margin"),
])
def test_fleet_timing_is_validated(values: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        FleetConfig(**values)


def test_a_stale_holders_log_tail_commits_nothing(fleet: Callable[..., FleetLeases], postgres_url: str) -> None:
    """The tail's writer commits through a Core connection (issue 25): the lease's fence still runs in that
    transaction, so a replica that lost its lease (but still believes in it) stores no position and no row."""
    from tests.store.test_txnlog_tail import FakeTail, the_log
    from txnwatch.collect.txnlog_tail import ClusterTail
    from txnwatch.core.views import LatestState
    from txnwatch.store import txnlog as store_txnlog
    from txnwatch.store.clusters import register_clusters

    clock = Clock()
    a = fleet("a", clock=clock)
    rounds(a)
    engine = make_engine(postgres_url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        cid = register_clusters(session, {"east": "h:9092"}, datetime.now(UTC))["east"]
    log = the_log(ids=4, transactions=10)
    tail_clock = [1_000.0]
    tail = ClusterTail("east", "h", lambda p: FakeTail(log, p, random.Random(1)), sessions, LatestState(["east"]),
                       leading=lambda: a.term("east"), fence=lambda session: a.fence(session, "east"),
                       clock=lambda: tail_clock[0], read_timeout_ms=0)

    def stored() -> tuple[dict[int, int], int]:
        with sessions() as session:
            X = m.TransactionTransition
            return (store_txnlog.load(session, cid).positions,
                    session.scalar(select(func.count()).select_from(X).where(X.cluster_id == cid)) or 0)

    for _ in range(6):  # the holder's commits land
        tail.step()
        tail_clock[0] += 0.5
    assert tail.wait_committed()
    positions, rows = stored()
    assert positions and rows

    b = fleet("b")
    clock.frozen = time.monotonic()  # a's world stops here: its local term never runs out
    wait_for(lambda: (b.run_round(), len(b.held()) == 2)[1], TIMING.lease_s + 5, interval=0.05, what="b takes all")
    assert a.term("east") is not None  # the stale belief: the tail goes on reading and tries to commit
    for _ in range(40):
        tail.step()
        tail_clock[0] += 0.5
    tail.close()
    assert stored() == (positions, rows)  # every commit refused by the fence
    engine.dispose()
