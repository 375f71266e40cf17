"""The canary's round (txnwatch.canary.probe) over a fake Kafka boundary, its metrics and its alert condition.

The fake is only the Kafka side (``CanaryCalls``): the rules, the bookkeeping, the metrics and the condition
builder are the real ones; both clocks are the test's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client.registry import CollectorRegistry

from txnwatch.alerting.conditions import TRANSACTIONS_CANNOT_COMMIT, cluster_incident_key
from txnwatch.alerting.from_findings import ConditionBuilder
from txnwatch.canary.probe import ClusterCanary, ProbeSettings
from txnwatch.core.canary import BlameKind, CanaryStage, CanaryView, CoordinatorLocation, StepError
from txnwatch.core.model import ErrorClass
from txnwatch.metrics.canary import CanaryMetrics

SETTINGS = ProbeSettings(topic="_txnwatch_canary", transactional_id="txnwatch-canary-lab", interval_s=1,
                         timeout_ms=1_000, failures_to_alert=2)
NOT_AVAILABLE = StepError(CanaryStage.COORDINATOR, "COORDINATOR_NOT_AVAILABLE", ErrorClass.REFRESH_RETRIABLE)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


@dataclass
class FakeKafka:
    """Leaders 0→1, 1→2, 2→3; a commit takes ``commit_cost_ms``; the reader sees a record ``visible_after_ms``
    after its commit unless the partition is in ``invisible``."""

    clock: Clock
    coordinator: CoordinatorLocation = field(default_factory=lambda: CoordinatorLocation(2, 7, 2, (2,)))
    commit_cost_ms: int = 15
    visible_after_ms: int = 30
    invisible: set[int] = field(default_factory=set)
    closed: int = 0
    _committed: list[tuple[int, int, bytes]] = field(default_factory=list)

    def ensure_topic(self) -> tuple[dict[int, int | None], StepError | None]:
        return {0: 1, 1: 2, 2: 3}, None

    def locate(self) -> CoordinatorLocation:
        return self.coordinator

    def commit(self, partition: int, payload: bytes) -> StepError | None:
        self.clock.ms += self.commit_cost_ms
        if self.coordinator.error is not None:
            return StepError(CanaryStage.INIT, "REQUEST_TIMED_OUT", ErrorClass.RETRIABLE)
        self._committed.append((self.clock.ms, partition, payload))
        return None

    def read(self, partitions: tuple[int, ...], max_wait_ms: int) -> list[tuple[int, bytes]]:
        self.clock.ms += max_wait_ms
        ready = [(p, v) for at, p, v in self._committed
                 if p not in self.invisible and self.clock.ms - at >= self.visible_after_ms]
        self._committed = [c for c in self._committed if (c[1], c[2]) not in set(ready)]
        return ready

    def close(self) -> None:
        self.closed += 1


def canary(kafka: FakeKafka, clock: Clock, registry: CollectorRegistry | None = None, *,
           leading: bool = True) -> ClusterCanary:
    sinks = [CanaryMetrics(registry, ["lab"])] if registry is not None else []
    return ClusterCanary("lab", SETTINGS, lambda: kafka, sinks, leading=lambda: leading, wall_ms=clock,
                         mono_ms=clock)


def test_a_healthy_round_measures_both_latencies_per_partition() -> None:
    clock = Clock()
    registry = CollectorRegistry(auto_describe=False)
    round_ = canary(FakeKafka(clock), clock, registry).run_round()
    assert round_ is not None and round_.ok
    assert [(a.partition, a.leader_id, a.commit_ms) for a in round_.attempts] == [(0, 1, 15), (1, 2, 15), (2, 3, 15)]
    assert all(a.visible_ms is not None and 30 <= a.visible_ms < 30 + 200 for a in round_.attempts)
    value = registry.get_sample_value
    assert value("txnwatch_canary_up", {"cluster": "lab"}) == 1
    assert value("txnwatch_canary_coordinator_broker", {"cluster": "lab"}) == 2
    assert value("txnwatch_canary_transactions_total", {"cluster": "lab", "leader": "3"}) == 1
    assert value("txnwatch_canary_commit_latency_seconds_count", {"cluster": "lab", "leader": "1"}) == 1
    assert value("txnwatch_canary_commit_latency_seconds_sum", {"cluster": "lab", "leader": "1"}) == 0.015
    assert value("txnwatch_canary_visibility_latency_seconds_count", {"cluster": "lab", "leader": "2"}) == 1


def test_a_record_never_visible_fails_its_partition_and_blames_its_leader() -> None:
    clock = Clock()
    registry = CollectorRegistry(auto_describe=False)
    probe = canary(FakeKafka(clock, invisible={1}), clock, registry)
    first, second = probe.run_round(), probe.run_round()
    assert first is not None and second is not None
    assert [a.partition for a in second.failures] == [1]
    (failure,) = second.failures
    assert failure.error is not None and failure.error.stage is CanaryStage.VISIBILITY
    assert failure.commit_ms == 15 and failure.visible_ms is None
    assert probe.finding is not None and probe.finding.blame.kind is BlameKind.PARTITION_LEADER
    assert probe.finding.blame.broker_id == 2
    assert registry.get_sample_value("txnwatch_canary_failures_total", {
        "cluster": "lab", "stage": "visibility", "error_class": "unknown", "leader": "2", "coordinator": "2"}) == 2
    assert registry.get_sample_value("txnwatch_canary_up", {"cluster": "lab"}) == 0


def test_a_lost_coordinator_opens_the_finding_and_the_condition_names_the_broker() -> None:
    clock = Clock()
    kafka = FakeKafka(clock)
    probe = canary(kafka, clock)
    builder = ConditionBuilder("lab", "localhost:9092", canary=lambda: probe.finding)
    probe.run_round()
    kafka.coordinator = CoordinatorLocation(None, 7, None, (2,), NOT_AVAILABLE)
    probe.run_round()
    assert probe.finding is None and builder.build(None, None, clock.ms) == []
    probe.run_round()
    (condition,) = builder.build(None, None, clock.ms)
    assert condition.rule == TRANSACTIONS_CANNOT_COMMIT
    assert condition.incident_key == cluster_incident_key(TRANSACTIONS_CANNOT_COMMIT, "lab")
    assert "__transaction_state-7 has no leader" in condition.summary and "broker 2" in condition.summary
    assert condition.details["broker_id"] == 2 and condition.details["transaction_state_partition"] == 7
    kafka.coordinator = CoordinatorLocation(2, 7, 2, (2,))
    probe.run_round()
    assert probe.finding is None and builder.build(None, None, clock.ms) == []


def test_an_unexpected_error_is_kept_as_last_error_and_the_connection_made_anew() -> None:
    clock = Clock()
    kafka = FakeKafka(clock)
    attempts = []

    def connect() -> FakeKafka:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("no route to host")
        return kafka

    probe = ClusterCanary("lab", SETTINGS, connect, wall_ms=clock, mono_ms=clock)
    assert probe.run_round() is None
    assert probe.last_error == "OSError: no route to host" and probe.finding is None
    round_ = probe.run_round()
    assert round_ is not None and round_.ok and probe.last_error is None and len(attempts) == 2


def test_a_replica_that_does_not_lead_runs_no_round_and_closes_its_connections() -> None:
    clock = Clock()
    kafka = FakeKafka(clock)
    leading = [True]
    probe = ClusterCanary("lab", SETTINGS, lambda: kafka, leading=lambda: leading[0], wall_ms=clock, mono_ms=clock)
    assert probe.run_round() is not None
    leading[0] = False
    assert probe.run_round() is None and kafka.closed == 1


def test_each_round_publishes_its_view_and_a_replica_that_stands_down_withdraws_it() -> None:
    """The view the API and the console read: the latest round, the open finding, the last error; None once
    another replica leads (its own canary shows then)."""
    clock = Clock()
    kafka = FakeKafka(clock)
    leading = [True]
    views: list[CanaryView | None] = []
    probe = ClusterCanary("lab", SETTINGS, lambda: kafka, leading=lambda: leading[0], publish=views.append,
                          wall_ms=clock, mono_ms=clock)
    healthy = probe.run_round()
    assert views == [CanaryView(SETTINGS.transactional_id, SETTINGS.topic, SETTINGS.interval_s, healthy, None, None)]
    kafka.coordinator = CoordinatorLocation(None, 7, None, (2,), NOT_AVAILABLE)
    probe.run_round()
    probe.run_round()
    latest = views[-1]
    assert latest is not None and latest.last_round is not None and not latest.last_round.ok
    assert latest.finding is not None and latest.finding is probe.finding and latest.finding.failed_rounds == 2
    leading[0] = False
    probe.run_round()
    probe.run_round()
    assert views[-1] is None and len(views) == 4  # withdrawn once, not again every round


def test_the_service_keeps_running_rounds_through_failures_and_stops_promptly() -> None:
    """Its own thread: a canary whose connection never comes up keeps its last_error and never raises out."""
    import time

    from txnwatch.canary.service import CanaryService

    def connect() -> FakeKafka:
        raise ConnectionRefusedError("kafka:9092")

    fast = ProbeSettings("_txnwatch_canary", "txnwatch-canary-lab", interval_s=0.01, timeout_ms=500,
                         failures_to_alert=2)
    failing = ClusterCanary("down", fast, connect)
    clock = Clock()
    healthy = ClusterCanary("up", fast, lambda: FakeKafka(clock), wall_ms=clock, mono_ms=clock)
    service = CanaryService([failing, healthy])
    service.start()
    deadline = time.monotonic() + 10
    while (healthy.last_round is None or failing.last_error is None) and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    service.stop()
    assert time.monotonic() - started < 5
    assert failing.last_error == "ConnectionRefusedError: kafka:9092" and failing.finding is None
    assert healthy.last_round is not None and healthy.last_round.ok
