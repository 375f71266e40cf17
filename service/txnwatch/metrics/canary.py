"""The transactional canary's figures: our own events, counted where they happen (a sink of each round).

Labels are bounded by the cluster's size: ``leader`` and ``coordinator`` are broker ids (``none`` when there was
none), ``stage`` one of txnwatch.core.canary.CanaryStage, ``error_class`` one of KIP-1050's classes.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry

from txnwatch.core.canary import CanaryRound

#: From a healthy lab's ~10 ms commit to a coordinator's 5 s step timeout.
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
NONE = "none"


def _broker(node: int | None) -> str:
    return NONE if node is None else str(node)


class CanaryMetrics:
    """The canary's sink; its series live in the runtime's registry."""

    def __init__(self, registry: CollectorRegistry, clusters: Iterable[str]) -> None:
        self.transactions = Counter("txnwatch_canary_transactions", "Canary transactions attempted, by the leader "
                                    "of their partition.", ("cluster", "leader"), registry=registry)
        self.failures = Counter("txnwatch_canary_failures", "Canary transactions (or rounds, when the topic or the "
                                "coordinator failed first) that did not commit or were not seen by the "
                                "read_committed reader, by stage, KIP-1050 error class, partition leader and "
                                "coordinator.", ("cluster", "stage", "error_class", "leader", "coordinator"),
                                registry=registry)
        self.commit_latency = Histogram("txnwatch_canary_commit_latency_seconds", "Canary transactions: begin to "
                                        "the commit acknowledged.", ("cluster", "leader"), registry=registry,
                                        buckets=LATENCY_BUCKETS_S)
        self.visibility_latency = Histogram("txnwatch_canary_visibility_latency_seconds", "Canary transactions: the "
                                            "commit acknowledged to a read_committed reader being handed the record "
                                            "(the partition's LSO passed it).", ("cluster", "leader"),
                                            registry=registry, buckets=LATENCY_BUCKETS_S)
        self.up = Gauge("txnwatch_canary_up", "1 if the canary's latest round committed and saw every transaction, "
                        "0 if one failed.", ("cluster",), registry=registry)
        self.coordinator = Gauge("txnwatch_canary_coordinator_broker", "Broker id of the canary's transaction "
                                 "coordinator in its latest round; -1 if none was found.", ("cluster",),
                                 registry=registry)
        for cluster in clusters:
            self.up.labels(cluster)
            self.coordinator.labels(cluster).set(-1)

    def on_round(self, cluster: str, round_: CanaryRound) -> None:
        coordinator = round_.coordinator.broker_id
        self.coordinator.labels(cluster).set(-1 if coordinator is None else coordinator)
        self.up.labels(cluster).set(1 if round_.ok else 0)
        for attempt in round_.attempts:
            leader = _broker(attempt.leader_id)
            if attempt.partition is not None:
                self.transactions.labels(cluster, leader).inc()
            if attempt.commit_ms is not None:
                self.commit_latency.labels(cluster, leader).observe(attempt.commit_ms / 1000)
            if attempt.visible_ms is not None:
                self.visibility_latency.labels(cluster, leader).observe(attempt.visible_ms / 1000)
            if attempt.error is not None:
                self.failures.labels(cluster, attempt.error.stage.value, attempt.error.error_class.value, leader,
                                     _broker(coordinator)).inc()
