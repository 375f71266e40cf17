"""A cluster that stays down pages on time, however long the collector's backoff grows (issue 15, defect 1).

The collector and the evaluator run here for real (SQLite, the real AlertSink), under an
injected clock: an 8 s ``for:`` at a 1 s poll interval with the default 5-10-20-40 s
backoff, which outgrows the evaluator's 5-poll gap window after the second failure.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from tests.fixtures.migrated import migrate
from txnwatch.alerting import Alerting
from txnwatch.alerting.from_findings import AlertSink, ConditionBuilder
from txnwatch.collect.poll_loop import POLL_BACKOFF, ClusterPollLoop
from txnwatch.core.config import Settings
from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot
from txnwatch.core.views import LatestState
from txnwatch.store import models as m
from txnwatch.store.clusters import register_clusters
from txnwatch.store.db import make_engine, make_sessionmaker

INTERVAL_S = 1.0
FOR_S = 8.0


class Unreachable(ConnectionError):
    cluster_unreachable = True  # as kafka.errors.ClusterUnreachable says it


class Cluster:
    """A fake at the Kafka boundary: down until ``up`` is set; the probe is what a bootstrap would see."""

    def __init__(self) -> None:
        self.up = False
        self.polls = 0
        self.probes = 0

    def poll(self) -> ClusterSnapshot:
        self.polls += 1
        if not self.up:
            raise Unreachable("no broker answered")
        return ClusterSnapshot(cluster="c", taken_at_ms=0, duration_ms=1)

    def probe(self) -> None:
        self.probes += 1
        if not self.up:
            raise ConnectionError("bootstrap failed")

    def close(self) -> None:
        pass


@pytest.fixture
def sessions(sqlite_url: str) -> Any:
    migrate(sqlite_url)
    engine = make_engine(sqlite_url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:  # as the daemon's store does at start
        register_clusters(session, {"c": "h:1"}, datetime.now(timezone.utc))
    yield sessions
    engine.dispose()


def build(sessions: sessionmaker[Session], cluster: Cluster, clock: list[float]) -> ClusterPollLoop:
    settings = Settings(poll_interval_seconds=INTERVAL_S, clusters=[{"name": "c", "bootstrap_servers": ["h:1"]}],
                        alert_rules={"cluster_down": {"for_seconds": FOR_S}})
    state = LatestState(["c"])
    alerting = Alerting.from_settings(settings, sessions)
    sink = AlertSink(alerting, {"c": ConditionBuilder("c", "h:1")}, sessions, alerting.rules)
    return ClusterPollLoop("c", lambda: cluster, lambda s, snap, now: (s, Findings(snap.cluster, now)), lambda: None, [sink], state,
                            clock=lambda: clock[0], backoff=POLL_BACKOFF)


def cluster_down_state(sessions: sessionmaker[Session]) -> str | None:
    with sessions() as session:
        return session.scalar(select(m.Alert.state).where(m.Alert.rule == "cluster_down").order_by(m.Alert.id.desc()))


def test_cluster_down_fires_within_for_plus_one_interval_despite_backoff(sessions: sessionmaker[Session]) -> None:
    clock, cluster = [1_000_000.0], Cluster()
    collector = build(sessions, cluster, clock)
    start, fired_after = clock[0], None
    for _ in range(120):  # two minutes of ticks: the backoff reaches 40 s and beyond
        collector.poll_once()
        if fired_after is None and cluster_down_state(sessions) == "firing":
            fired_after = clock[0] - start
        clock[0] += INTERVAL_S
    assert fired_after is not None, "cluster_down never fired: its for: clock restarted while the collector backed off"
    assert fired_after <= FOR_S + INTERVAL_S
    assert cluster.polls <= 6, f"{cluster.polls} full polls in 2 min: the backoff no longer spaces them out"


class SlowProbeCluster(Cluster):
    """A cut-off cluster whose bootstrap waits out the default 5 s connect timeout (far past the 1 s interval)."""

    def __init__(self, clock: list[float]) -> None:
        super().__init__()
        self.clock = clock

    def probe(self) -> None:
        self.clock[0] += 5.0
        super().probe()


def test_cluster_down_fires_when_each_probe_outlasts_the_interval(sessions: sessionmaker[Session]) -> None:
    """Reports ~6 s apart (interval + connect timeout) are not a gap in watching: for: must not restart."""
    clock = [1_000_000.0]
    cluster = SlowProbeCluster(clock)
    collector = build(sessions, cluster, clock)
    start, fired_after = clock[0], None
    for _ in range(40):
        collector.poll_once()
        if fired_after is None and cluster_down_state(sessions) == "firing":
            fired_after = clock[0] - start
        clock[0] += INTERVAL_S
    assert fired_after is not None, "cluster_down never fired: each slow probe restarted its for: clock"
    assert fired_after <= FOR_S + INTERVAL_S + 5.0 + 5.0  # one tick of interval + connect timeout, and its probe


def test_polling_resumes_within_one_interval_of_the_clusters_return(sessions: sessionmaker[Session]) -> None:
    clock, cluster = [1_000_000.0], Cluster()
    collector = build(sessions, cluster, clock)
    for _ in range(36):  # failures at 0, 5, 15, 35 s: the next full poll is 40 s away
        collector.poll_once()
        clock[0] += INTERVAL_S
    assert collector._state.get("c").consecutive_failures == 4  # type: ignore[union-attr]  # the cluster's view exists once it has been polled
    cluster.up = True
    back_at = clock[0]
    while collector._state.get("c").up is not True and clock[0] - back_at < 60:  # type: ignore[union-attr]  # the cluster's view exists once it has been polled
        collector.poll_once()
        clock[0] += INTERVAL_S
    assert clock[0] - back_at <= INTERVAL_S, f"blind for {clock[0] - back_at:.0f}s after the cluster came back"
    assert cluster_down_state(sessions) == "resolved"


def test_reachable_but_failing_cluster_stays_backed_off(sessions: sessionmaker[Session]) -> None:
    """The probe succeeds all along, so it cannot tell recovery: the backoff must still hold the full polls."""
    clock, cluster = [1_000_000.0], Cluster()

    class Struggling(Cluster):
        def poll(self) -> ClusterSnapshot:
            self.polls += 1
            raise TimeoutError("ListTransactions timed out")  # the cluster answered the bootstrap

        def probe(self) -> None:
            self.probes += 1

    cluster = Struggling()
    collector = build(sessions, cluster, clock)
    for _ in range(60):
        collector.poll_once()
        clock[0] += INTERVAL_S
    assert cluster.polls <= 5
    assert cluster_down_state(sessions) == "firing"
