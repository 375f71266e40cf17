"""/metrics: prometheus-client custom collectors over the latest published state.

Every scrape builds its series from the current :class:`~txnwatch.core.views.LatestState`,
so series of transactions, partitions and groups that vanished from Kafka vanish
from /metrics too, and a scrape never waits on Kafka or the database.  Names follow
kafka_exporter/KMinion where the meaning is the same (``kafka_consumergroup_lag``
is lag against the high watermark, as there); ``txnwatch_*`` covers the rest.
docs/metrics.md documents every family; a test keeps the two in step.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

from prometheus_client import disable_created_metrics
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from txnwatch.core.model import ClusterSnapshot, TopicPartition, TransactionDescription
from txnwatch.core.views import ClusterView, LatestState
from txnwatch.core.vocabulary import OPEN_STATES, TxnEvent, TxnState
from txnwatch.detect.cardinality import GROUP_PARTITIONS_OVER_CAP, GROUPS_FILTERED, GROUPS_OVER_CAP
from txnwatch.metrics.broker_signals import BrokerSignalsCollector
from txnwatch.metrics.lag import LagFamilies, LagMetricOptions
from txnwatch.metrics.render import LeanGauge, int_label
from txnwatch.metrics.verification import BrokerVerificationCollector

PARTITION = ["cluster", "topic", "partition"]
GROUP_PARTITION = ["cluster", "consumergroup", "topic", "partition"]


def _gauge(name: str, doc: str, labels: list[str]) -> LeanGauge:
    return LeanGauge(name, doc, labels)


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
        for view in self._state.views():
            if view.last_poll_at_ms is None:  # not polled by this replica (yet): another one may hold the cluster
                continue
            up.add_metric([view.name], 1.0 if view.up else 0.0)
            if view.last_poll_duration_ms is not None:
                duration.add_metric([view.name], view.last_poll_duration_ms / 1000)
            if view.last_success_at_ms is not None:
                last.add_metric([view.name], view.last_success_at_ms / 1000)
        leader = _gauge("txnwatch_leader", "1 if this replica holds the lease of at least one cluster (polls and pages for it).", [])
        leader.add_metric([], 1.0 if self._is_leader() else 0.0)
        yield from (up, duration, last, leader)


class SnapshotCollector(Collector):
    """Series that come straight from the latest snapshot: transactions, offsets, group offsets."""

    def __init__(self, state: LatestState, clock: Callable[[], float] = time.time) -> None:
        self._state, self._clock = state, clock
        # A partition's label values, kept across renders (issue 25): the same tuple objects render after
        # render make the family cache's row compare an identity check, and spare a tuple per partition.
        # Replaced whole at the end of a collect: two collects at once only cache less.
        self._labels: dict[str, dict[TopicPartition, tuple[str, str, str]]] = {}

    def collect(self) -> Iterator[Metric]:
        by_state = _gauge("txnwatch_transactions", "Transactional ids known to the coordinators, by state.",
                          ["cluster", "state"])
        oldest = _gauge("txnwatch_transaction_oldest_open_age_seconds",
                        "Age of the oldest open transaction (Ongoing or Prepare*).", ["cluster"])
        lso = _gauge("txnwatch_partition_last_stable_offset",
                     "Last stable offset: read_committed consumers never read past it.", PARTITION)
        gap = _gauge("txnwatch_partition_lso_gap", "High watermark minus LSO: what read_committed consumers cannot see yet.",
                     PARTITION)
        open_txns = _gauge("txnwatch_partition_open_transactions",
                           "Producers with an open transaction on the partition (DescribeProducers).", PARTITION)
        now_ms = self._clock() * 1000
        labels_now: dict[str, dict[TopicPartition, tuple[str, str, str]]] = {}
        # Rows appended directly, not through add_metric: ~6,000 rows a render on the lab, and every
        # row here has the families' three label values by construction.
        lso_rows, lso_values = lso.rows, lso.values
        gap_rows, gap_values = gap.rows, gap.values
        open_rows, open_values = open_txns.rows, open_txns.values
        for view in self._state.views():
            snap = view.snapshot
            if snap is None:
                continue
            _transactions(view.name, snap, now_ms, by_state, oldest)
            known = self._labels.get(view.name, {})
            kept = labels_now[view.name] = {}
            for p in snap.partitions.values():
                tp = p.tp
                labels = known.get(tp)
                if labels is None:
                    labels = (view.name, tp.topic, int_label(tp.partition))  # one tuple for the three families
                kept[tp] = labels
                lso_value = p.last_stable_offset
                if lso_value is not None:
                    lso_rows.append(labels)
                    lso_values.append(lso_value)
                    if p.high_watermark is not None:
                        gap_rows.append(labels)
                        gap_values.append(p.high_watermark - lso_value)
                if p.producers is not None:
                    open_rows.append(labels)
                    open_values.append(sum(1 for pr in p.producers if pr.has_open_txn))
        self._labels = labels_now
        yield from (by_state, oldest, lso, gap, open_txns)


def _transactions(cluster: str, snap: ClusterSnapshot, now_ms: float, by_state: LeanGauge,
                  oldest: LeanGauge) -> None:
    counts = dict.fromkeys(TxnState, 0)
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


class LagCollector(Collector):
    """Offsets and consumer lag: kafka_exporter's families and txnwatch's own (see txnwatch.metrics.lag)."""

    def __init__(self, state: LatestState, options: LagMetricOptions) -> None:
        self._state = state
        self._families = LagFamilies(options)  # keeps each group's series while its rows stay equal

    def collect(self) -> Iterator[Metric]:
        yield from self._families.families(self._state.views())


def build_registry(state: LatestState, is_leader: Callable[[], bool], lag_options: LagMetricOptions | None = None,
                   own: Iterable[Collector] = ()) -> CollectorRegistry:
    """One registry per runtime; ``own`` are the collectors of parts that export their own figures (the store)."""
    disable_created_metrics()  # no *_created series: the exposition stays the documented families, nothing else
    registry = CollectorRegistry(auto_describe=False)
    for collector in own:
        registry.register(collector)
    registry.register(ClusterCollector(state, is_leader))
    registry.register(SnapshotCollector(state))
    registry.register(FindingsCollector(state, describe_findings))
    registry.register(LagCollector(state, lag_options or LagMetricOptions()))
    registry.register(BrokerVerificationCollector(state))
    registry.register(BrokerSignalsCollector(state))
    from txnwatch.metrics.history import HistoryCollector

    registry.register(HistoryCollector(state))
    return registry


AGE_THRESHOLDS_S = (10, 60, 300, 900, 3600)
TOP_TRANSACTIONS = 50

#: txnwatch_cardinality_omitted series every polled cluster has, 0 when nothing is left out.
TRANSACTIONS_OVER_CAP = ("transactional_id", "cap")
OMITTED_KINDS = (GROUPS_FILTERED, GROUPS_OVER_CAP, GROUP_PARTITIONS_OVER_CAP, TRANSACTIONS_OVER_CAP)

#: Cumulative per-cluster event counters (ClusterView.counters keys) → counter families.
EVENT_COUNTERS = {
    TxnEvent.COMMIT: ("txnwatch_transaction_commits", "Transactions observed to complete with a commit."),
    TxnEvent.ABORT: ("txnwatch_transaction_aborts", "Transactions observed to complete with an abort (timeout aborts included)."),
    TxnEvent.TIMEOUT_ABORT: ("txnwatch_transaction_timeout_aborts",
                      "Aborts by the coordinator after transaction.timeout.ms, with an epoch bump (KIP-588/KIP-360)."),
    TxnEvent.FENCED: ("txnwatch_producer_fencings", "Open transactions ended by a new producer instance with the same "
               "transactional id (InitProducerId fencing the epoch)."),
    TxnEvent.EPOCH_BUMP: ("txnwatch_producer_epoch_bumps", "Producer epoch increases within a producer id, summed "
                   "(under transaction version 2 every commit and abort bumps once)."),
    TxnEvent.ILLEGAL_TRANSITION: ("txnwatch_illegal_transitions",
                           "Transitions the coordinator state machine does not allow (e.g. PrepareCommit -> PrepareAbort)."),
}


#: EVENT_COUNTERS keys that come from the transaction log in exact mode (the rest are always polled).
HISTORY_EVENTS = frozenset({TxnEvent.COMMIT, TxnEvent.ABORT, TxnEvent.TIMEOUT_ABORT, TxnEvent.FENCED,
                            TxnEvent.EPOCH_BUMP, TxnEvent.ILLEGAL_TRANSITION})


def describe_findings(views: list[ClusterView], now_s: float | None = None) -> Iterator[Metric]:
    """Families derived from detection findings and the per-cluster counters the collector keeps."""
    now_ms = (now_s if now_s is not None else time.time()) * 1000
    oldest_by_state = _gauge("txnwatch_transaction_oldest_age_seconds",
                             "Age of the oldest transaction in each open state, 0 when none.", ["cluster", "state"])
    older_than = _gauge("txnwatch_open_transactions_older_than", "Open transactions older than a threshold.",
                        ["cluster", "older_than_seconds"])
    past_timeout = _gauge("txnwatch_transactions_past_timeout",
                          "Open transactions older than their own transaction.timeout.ms plus grace.", ["cluster"])
    txn_age = _gauge("txnwatch_transaction_age_seconds", "Age of the oldest open transactions (top 50 per cluster).",
                     ["cluster", "transactional_id", "state"])
    txn_timeout = _gauge("txnwatch_transaction_timeout_seconds", "transaction.timeout.ms of the same transactions.",
                         ["cluster", "transactional_id"])
    hanging_count = _gauge("txnwatch_hanging_transactions", "Hanging transactions currently detected.", ["cluster"])
    hanging_age = _gauge("txnwatch_hanging_transaction_age_seconds", "One series per hanging transaction.",
                         ["cluster", "topic", "partition", "producer_id", "transactional_id", "reason",
                          "start_offset"])
    stalled = _gauge("txnwatch_partition_lso_stalled", "1 while an LSO stall episode is active on the partition.",
                     PARTITION)
    stall_duration = _gauge("txnwatch_lso_stall_duration_seconds", "One series per active LSO stall.",
                            ["cluster", "topic", "partition", "producer_id", "transactional_id", "start_offset"])
    stalls = _gauge("txnwatch_lso_stalls", "Active LSO stall episodes.", ["cluster"])
    omitted = _gauge("txnwatch_cardinality_omitted", "Objects left out of the per-object series (and of lag rows "
                     "and the API) by a filter or a cap, by kind and reason.", ["cluster", "kind", "reason"])
    transitions = _counter("txnwatch_transaction_transitions", "Observed coordinator state transitions.",
                           ["cluster", "from_state", "to_state"])
    events = {key: _counter(name, doc, ["cluster"]) for key, (name, doc) in EVENT_COUNTERS.items()}
    for view in views:
        name = view.name
        exact = view.history.counters if view.history.exact else None
        for event, family in events.items():
            # Coordinator history: exact from the transaction log when it is read, else what polling saw.
            source = exact if exact is not None and event in HISTORY_EVENTS else view.counters
            family.add_metric([name], source.get(event, 0))
        for key, value in sorted((exact if exact is not None else view.counters).items()):
            if key.startswith("transition:"):
                _, from_state, to_state = key.split(":", 2)
                transitions.add_metric([name, from_state, to_state], value)
        left_out = dict.fromkeys(OMITTED_KINDS, 0)
        if view.snapshot is not None:
            left_out[TRANSACTIONS_OVER_CAP] = _transaction_ages(view, now_ms, oldest_by_state, older_than, txn_age,
                                                                 txn_timeout)
        findings = view.findings
        if findings is not None:
            left_out.update(findings.omitted)
        if view.snapshot is not None or findings is not None:
            for (kind, reason), count in left_out.items():
                omitted.add_metric([name, kind, reason], count)
        if findings is None:
            continue
        past_timeout.add_metric([name], len(findings.overdue))
        hanging_count.add_metric([name], len(findings.hanging))
        for h in findings.hanging:
            hanging_age.add_metric([name, h.tp.topic, str(h.tp.partition), str(h.producer_id), h.transactional_id or "",
                                    h.reason.value, str(h.txn_start_offset)], h.age_ms / 1000)
        active = {s.tp: s for s in findings.lso_stalls}
        stalls.add_metric([name], len(active))
        for tp in (view.snapshot.partitions if view.snapshot else {}):
            stalled.add_metric((name, tp.topic, int_label(tp.partition)), 1.0 if tp in active else 0.0)
        for s in active.values():
            stall_duration.add_metric([name, s.tp.topic, str(s.tp.partition),
                                       "" if s.blocking_producer_id is None else str(s.blocking_producer_id),
                                       s.blocking_transactional_id or "", str(s.stalled_lso)],
                                      (s.last_seen_ms - s.started_ms) / 1000)
    yield from (oldest_by_state, older_than, past_timeout, txn_age, txn_timeout, hanging_count, hanging_age, stalled,
                stall_duration, stalls, omitted, transitions,
                *events.values())


class _IdView(NamedTuple):
    transactional_id: str
    state: TxnState
    start_time_ms: int | None
    timeout_ms: int


def _one_view(view: ClusterView) -> Iterable[_IdView | TransactionDescription]:
    """Each id's state as the API and the console show it: the log's where it speaks (exact mode), the poll's
    for the others (store.queries.shown is the same rule over the database)."""
    assert view.snapshot is not None
    polled = view.snapshot.transactions
    logged = view.history.states if view.history.exact else None
    if not logged:
        return polled.values()
    merged: list[_IdView | TransactionDescription] = [
        _IdView(tid, s.state, s.start_ms, s.timeout_ms) for tid, s in logged.items() if s.state in OPEN_STATES]
    merged += [t for tid, t in polled.items() if tid not in logged]
    return merged


def _transaction_ages(view: ClusterView, now_ms: float, oldest_by_state: LeanGauge,
                      older_than: LeanGauge, txn_age: LeanGauge, txn_timeout: LeanGauge) -> int:
    """Fills the age families; returns how many open transactions the top-50 cap left without a series."""
    assert view.snapshot is not None
    open_txns = [t for t in _one_view(view) if t.state in OPEN_STATES and t.start_time_ms is not None]
    ages = {t.transactional_id: max(0.0, (now_ms - (t.start_time_ms or 0)) / 1000) for t in open_txns}
    for state in OPEN_STATES:
        in_state = [ages[t.transactional_id] for t in open_txns if t.state is state]
        oldest_by_state.add_metric([view.name, state.value], max(in_state, default=0.0))
    for threshold in AGE_THRESHOLDS_S:
        older_than.add_metric([view.name, str(threshold)], sum(1 for age in ages.values() if age > threshold))
    for t in sorted(open_txns, key=lambda t: t.start_time_ms or 0)[:TOP_TRANSACTIONS]:
        txn_age.add_metric([view.name, t.transactional_id, t.state.value], ages[t.transactional_id])
        txn_timeout.add_metric([view.name, t.transactional_id], t.timeout_ms / 1000)
    return max(0, len(open_txns) - TOP_TRANSACTIONS)
