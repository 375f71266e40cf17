"""Property: whatever the sequence of polls, restarts and delivery failures, each dedup key
sees trigger, resolve, trigger, resolve… and the count matches the incidents that fired."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, select

from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import T0, hanging, rules
from tests.fixtures.lanes import examples
from txnwatch.alerting import OutboxDispatcher, evaluate
from txnwatch.alerting.outbox import Delivery
from txnwatch.alerting.snapshot import dedup_key
from txnwatch.core.backoff import Backoff
from txnwatch.store import models as m
from txnwatch.store.clusters import register_clusters
from txnwatch.store.db import make_sessionmaker

FOR_SECONDS = 30
INCIDENTS = 3


class FlakyNotifier:
    def __init__(self, rng: random.Random, failure_rate: float) -> None:
        self.rng, self.failure_rate = rng, failure_rate
        self.sent: list[tuple[str, str]] = []

    def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery:
        if self.rng.random() < self.failure_rate:
            return Delivery("retry", "HTTP 503: flaky")
        self.sent.append((event.action, event.dedup_key))
        return Delivery("sent", "HTTP 202")


polls = st.lists(
    st.tuples(st.frozensets(st.integers(0, INCIDENTS - 1)), st.integers(1, 40), st.booleans()),
    min_size=1, max_size=30,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(polls=polls, failure_rate=st.sampled_from([0.0, 0.3, 0.7]), seed=st.integers(0, 2**32 - 1))
def test_triggers_and_resolves_alternate(engine: Engine, polls: list[tuple[frozenset[int], int, bool]],
                                          failure_rate: float, seed: int) -> None:
    cluster = "c" + uuid.uuid4().hex[:16]  # hypothesis reuses the fixture's database: a fresh cluster per example
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        register_clusters(session, {cluster: "broker:9092"}, T0)
    rng = random.Random(seed)
    notifier = FlakyNotifier(rng, failure_rate)

    def dispatcher() -> OutboxDispatcher:  # rebuilt on "restart"
        return OutboxDispatcher(sessions, {"pagerduty": notifier}, backoff=Backoff(1, 8), rng=rng, max_attempts=10**6)

    send = dispatcher()
    rs = rules(for_seconds=FOR_SECONDS)
    conditions = {i: hanging(partition=i, cluster=cluster) for i in range(INCIDENTS)}
    present_since: dict[int, float] = {}
    expected_fired: dict[int, int] = dict.fromkeys(range(INCIDENTS), 0)
    firing: set[int] = set()
    now = 0.0
    for present, advance, restart in polls:
        now += advance
        with sessions.begin() as session:
            evaluate(session, cluster, [conditions[i] for i in sorted(present)], T0 + timedelta(seconds=now), rs)
        for i in range(INCIDENTS):  # reference model
            if i in present:
                present_since.setdefault(i, now)
                if i not in firing and now - present_since[i] >= FOR_SECONDS:
                    firing.add(i)
                    expected_fired[i] += 1
            else:
                present_since.pop(i, None)
                firing.discard(i)
        if restart:
            send = dispatcher()
        send.run_once(T0 + timedelta(seconds=now))

    notifier.failure_rate = 0.0
    send.run_once(T0 + timedelta(seconds=now + 3600))

    keys = {i: dedup_key(conditions[i].incident_key) for i in range(INCIDENTS)}
    for i, key in keys.items():
        actions = [a for a, k in notifier.sent if k == key]
        expected = ["trigger", "resolve"] * expected_fired[i]
        assert actions == (expected[:-1] if i in firing else expected)
        assert actions.count("trigger") == actions.count("resolve") + (1 if i in firing else 0)
    with sessions() as session:
        states = {a.incident_key: a.state for a in session.scalars(
            select(m.Alert).where(m.Alert.state.in_(("pending", "firing")), m.Alert.incident_key.like(f"%/{cluster}/%")))}
        assert {k for k, s in states.items() if s == "firing"} == {conditions[i].incident_key for i in firing}
        unsent = session.scalar(select(m.OutboxEvent.id).where(m.OutboxEvent.status != "sent",
                                                               m.OutboxEvent.dedup_key.like(f"%/{cluster}/%")))
        assert unsent is None
