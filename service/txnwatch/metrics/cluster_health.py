"""/metrics for the collector's own health per cluster: up, the latest poll's duration and time, answers refused
over a bound, the lease.

A cluster this replica has not polled (yet) has no series: another replica may hold its lease, and
its ``txnwatch_cluster_up`` there is the one that counts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from txnwatch.core.views import LatestState
from txnwatch.metrics.render import LeanGauge


class ClusterCollector(Collector):
    """Health of the collector itself, per cluster."""

    def __init__(self, state: LatestState, is_leader: Callable[[], bool], clock: Callable[[], float] = time.time) -> None:
        self._state, self._is_leader, self._clock = state, is_leader, clock

    def collect(self) -> Iterator[Metric]:
        up = LeanGauge("txnwatch_cluster_up", "1 if the latest poll of the cluster succeeded.", ["cluster"])
        duration = LeanGauge("txnwatch_poll_duration_seconds", "Wall time of the latest successful poll.", ["cluster"])
        last = LeanGauge("txnwatch_last_successful_poll_timestamp_seconds", "Unix time of the latest successful poll.",
                         ["cluster"])
        for view in self._state.views():
            if view.last_poll_at_ms is None:  # not polled by this replica (yet): another one may hold the cluster
                continue
            up.add_metric([view.name], 1.0 if view.up else 0.0)
            if view.last_poll_duration_ms is not None:
                duration.add_metric([view.name], view.last_poll_duration_ms / 1000)
            if view.last_success_at_ms is not None:
                last.add_metric([view.name], view.last_success_at_ms / 1000)
        refused = CounterMetricFamily(
            "txnwatch_responses_refused", "Broker answers refused over a bound before they were read (reason "
            "frame_bytes: the cluster's max_response_bytes) or decoded (entries: max_response_entries); each "
            "failed the cluster's poll.", labels=["cluster", "broker", "reason"])
        for view in self._state.views():
            for (broker, reason), count in sorted(view.refused.items()):
                refused.add_metric([view.name, broker, reason], count)
        leader = LeanGauge("txnwatch_leader",
                           "1 if this replica holds the lease of at least one cluster (polls and pages for it).", [])
        leader.add_metric([], 1.0 if self._is_leader() else 0.0)
        yield from (up, duration, last, refused, leader)
