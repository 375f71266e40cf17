"""/metrics: prometheus-client custom collectors over the latest published state.

Every scrape builds its series from the current :class:`~txnwatch.state.LatestState`,
so series of transactions, partitions and groups that vanished from Kafka vanish
from /metrics too, and a scrape never waits on Kafka or the database.  Names follow
kafka_exporter/KMinion where the meaning is the same (``kafka_consumergroup_lag``
is lag against the high watermark, as there); ``txnwatch_*`` covers the rest.
docs/metrics.md documents every family; a test keeps the two in step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from txnwatch.model import ClusterSnapshot, TxnState
from txnwatch.state import ClusterView, LatestState

PARTITION = ["cluster", "topic", "partition"]
GROUP_PARTITION = ["cluster", "consumergroup", "topic", "partition"]


def _gauge(name: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


class ClusterCollector(Collector):
    """Health of the collector itself, per cluster."""

    def __init__(self, state: LatestState, is_leader: Callable[[], bool], clock: Callable[[], float] = time.time) -> None:
        self._state, self._is_leader, self._clock = state, is_leader, clock

    def collect(self) -> Iterator[Metric]:
        up = _gauge("txnwatch_cluster_up", "1 if the latest poll of the cluster succeeded.", ["cluster"])
        duration = _gauge("txnwatch_poll_duration_seconds", "Wall time of the latest successful poll.", ["cluster"])
        last = _gauge("txnwatch_last_successful_poll_timestamp_seconds", "Unix time of the latest successful poll.",
                      ["cluster"])
        polls = _counter("txnwatch_polls", "Polls attempted.", ["cluster"])
        failures = _counter("txnwatch_poll_failures", "Polls that reached no broker.", ["cluster"])
        errors = _counter("txnwatch_request_errors", "Failed requests or per-object errors inside answers, by Kafka API.",
                          ["cluster", "api"])
        for view in self._state.views():
            up.add_metric([view.name], 1.0 if view.up else 0.0)
            polls.add_metric([view.name], view.polls)
            failures.add_metric([view.name], view.failed_polls)
            if view.last_poll_duration_ms is not None:
                duration.add_metric([view.name], view.last_poll_duration_ms / 1000)
            if view.last_success_at_ms is not None:
                last.add_metric([view.name], view.last_success_at_ms / 1000)
            for api, count in sorted(view.request_errors.items()):
                errors.add_metric([view.name, api], count)
        leader = _gauge("txnwatch_leader", "1 if this replica polls and notifies (leader election).", [])
        leader.add_metric([], 1.0 if self._is_leader() else 0.0)
        db_up = _gauge("txnwatch_db_up", "1 if the latest database write succeeded.", [])
        db_up.add_metric([], 1.0 if self._state.db_ok else 0.0)
        dropped = _counter("txnwatch_observations_dropped", "Polls dropped because the database was down longer than "
                           "the in-memory buffer holds.", [])
        dropped.add_metric([], self._state.dropped_observations)
        yield from (up, duration, last, polls, failures, errors, leader, db_up, dropped)


class SnapshotCollector(Collector):
    """Series that come straight from the latest snapshot: transactions, offsets, group offsets."""

    def __init__(self, state: LatestState, clock: Callable[[], float] = time.time) -> None:
        self._state, self._clock = state, clock

    def collect(self) -> Iterator[Metric]:
        by_state = _gauge("txnwatch_transactions", "Transactional ids known to the coordinators, by state.",
                          ["cluster", "state"])
        oldest = _gauge("txnwatch_transaction_oldest_open_age_seconds",
                        "Age of the oldest open transaction (Ongoing or Prepare*).", ["cluster"])
        hwm = _gauge("kafka_topic_partition_current_offset", "High watermark (kafka_exporter's name).", PARTITION)
        log_start = _gauge("kafka_topic_partition_oldest_offset", "Log start offset (kafka_exporter's name).", PARTITION)
        lso = _gauge("txnwatch_partition_last_stable_offset",
                     "Last stable offset: read_committed consumers never read past it.", PARTITION)
        gap = _gauge("txnwatch_partition_lso_gap", "High watermark minus LSO: what read_committed consumers cannot see yet.",
                     PARTITION)
        open_txns = _gauge("txnwatch_partition_open_transactions",
                           "Producers with an open transaction on the partition (DescribeProducers).", PARTITION)
        committed = _gauge("kafka_consumergroup_current_offset", "Committed offset of the group (kafka_exporter's name).",
                           GROUP_PARTITION)
        now_ms = self._clock() * 1000
        for view in self._state.views():
            snap = view.snapshot
            if snap is None:
                continue
            _transactions(view.name, snap, now_ms, by_state, oldest)
            for p in snap.partitions.values():
                labels = [view.name, p.tp.topic, str(p.tp.partition)]
                if p.high_watermark is not None:
                    hwm.add_metric(labels, p.high_watermark)
                if p.log_start_offset is not None:
                    log_start.add_metric(labels, p.log_start_offset)
                if p.last_stable_offset is not None:
                    lso.add_metric(labels, p.last_stable_offset)
                if p.high_watermark is not None and p.last_stable_offset is not None:
                    gap.add_metric(labels, p.high_watermark - p.last_stable_offset)
                if p.producers is not None:
                    open_txns.add_metric(labels, sum(1 for pr in p.producers if pr.has_open_txn))
            for group in snap.groups.values():
                for tp, offset in group.offsets.items():
                    committed.add_metric([view.name, group.group_id, tp.topic, str(tp.partition)], offset)
        yield from (by_state, oldest, hwm, log_start, lso, gap, open_txns, committed)


def _transactions(cluster: str, snap: ClusterSnapshot, now_ms: float, by_state: GaugeMetricFamily,
                  oldest: GaugeMetricFamily) -> None:
    counts = {state: 0 for state in TxnState}
    oldest_start: int | None = None
    for txn in snap.transactions.values():
        counts[txn.state] += 1
        if txn.state.is_open and txn.start_time_ms is not None:
            oldest_start = txn.start_time_ms if oldest_start is None else min(oldest_start, txn.start_time_ms)
    for state, count in counts.items():
        by_state.add_metric([cluster, state.value], count)
    oldest.add_metric([cluster], max(0.0, (now_ms - oldest_start) / 1000) if oldest_start is not None else 0.0)


class FindingsCollector(Collector):
    """Series derived by detection: hanging transactions, LSO stalls, verification, lag, event counters.

    ``describe`` turns one ClusterView's findings into metric families; it lives with
    the detection adapter so this module knows no finding types.
    """

    def __init__(self, state: LatestState, describe: Callable[[list[ClusterView]], Iterable[Metric]]) -> None:
        self._state, self._describe = state, describe

    def collect(self) -> Iterator[Metric]:
        yield from self._describe(self._state.views())


def build_registry(state: LatestState, is_leader: Callable[[], bool],
                   describe_findings: Callable[[list[ClusterView]], Iterable[Metric]] | None = None,
                   extra: Iterable[Collector] = ()) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ClusterCollector(state, is_leader))
    registry.register(SnapshotCollector(state))
    if describe_findings is not None:
        registry.register(FindingsCollector(state, describe_findings))
    for collector in extra:
        registry.register(collector)
    return registry
