"""/metrics derived by detection: transaction ages, hanging transactions, LSO stalls, left-out objects, event counters.

One render takes every cluster's latest view; each named piece below fills its families from one
view, so a family's series come cluster by cluster as the views do.  The commit/abort/fencing/
epoch-bump counters come from the transaction log when a cluster is in exact mode (its history),
else from what polling saw (metrics/history.py adds the log-only ones).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from txnwatch.core.findings import Findings
from txnwatch.core.model import TransactionDescription
from txnwatch.core.views import ClusterView, LatestState
from txnwatch.core.vocabulary import OPEN_STATES, TxnEvent, TxnState
from txnwatch.detect.cardinality import GROUP_PARTITIONS_OVER_CAP, GROUPS_FILTERED, GROUPS_OVER_CAP
from txnwatch.metrics.render import LeanGauge, int_label
from txnwatch.metrics.snapshot import PARTITION

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


class FindingsCollector(Collector):
    """Series derived by detection: hanging transactions, LSO stalls, verification, lag, event counters.

    ``describe`` turns the cluster views' findings into metric families (:func:`describe_findings`; a test
    passes one with a fixed clock).
    """

    def __init__(self, state: LatestState, describe: Callable[[list[ClusterView]], Iterable[Metric]]) -> None:
        self._state, self._describe = state, describe

    def collect(self) -> Iterator[Metric]:
        yield from self._describe(self._state.views())


def _gauge(name: str, doc: str, labels: list[str]) -> Callable[[], LeanGauge]:
    return lambda: LeanGauge(name, doc, labels)


@dataclass(slots=True)
class _Families:
    """One render's families, in the order they are exposed."""

    oldest_by_state: LeanGauge = field(default_factory=_gauge(
        "txnwatch_transaction_oldest_age_seconds", "Age of the oldest transaction in each open state, 0 when none.",
        ["cluster", "state"]))
    older_than: LeanGauge = field(default_factory=_gauge(
        "txnwatch_open_transactions_older_than", "Open transactions older than a threshold.",
        ["cluster", "older_than_seconds"]))
    past_timeout: LeanGauge = field(default_factory=_gauge(
        "txnwatch_transactions_past_timeout",
        "Open transactions older than their own transaction.timeout.ms plus grace.", ["cluster"]))
    txn_age: LeanGauge = field(default_factory=_gauge(
        "txnwatch_transaction_age_seconds", "Age of the oldest open transactions (top 50 per cluster).",
        ["cluster", "transactional_id", "state"]))
    txn_timeout: LeanGauge = field(default_factory=_gauge(
        "txnwatch_transaction_timeout_seconds", "transaction.timeout.ms of the same transactions.",
        ["cluster", "transactional_id"]))
    hanging_count: LeanGauge = field(default_factory=_gauge(
        "txnwatch_hanging_transactions", "Hanging transactions currently detected.", ["cluster"]))
    hanging_age: LeanGauge = field(default_factory=_gauge(
        "txnwatch_hanging_transaction_age_seconds", "One series per hanging transaction.",
        ["cluster", "topic", "partition", "producer_id", "transactional_id", "reason", "start_offset"]))
    stalled: LeanGauge = field(default_factory=_gauge(
        "txnwatch_partition_lso_stalled", "1 while an LSO stall episode is active on the partition.", PARTITION))
    stall_duration: LeanGauge = field(default_factory=_gauge(
        "txnwatch_lso_stall_duration_seconds", "One series per active LSO stall.",
        ["cluster", "topic", "partition", "producer_id", "transactional_id", "start_offset"]))
    stalls: LeanGauge = field(default_factory=_gauge("txnwatch_lso_stalls", "Active LSO stall episodes.", ["cluster"]))
    omitted: LeanGauge = field(default_factory=_gauge(
        "txnwatch_cardinality_omitted", "Objects left out of the per-object series (and of lag rows and the API) by "
        "a filter or a cap, by kind and reason.", ["cluster", "kind", "reason"]))
    transitions: CounterMetricFamily = field(default_factory=lambda: CounterMetricFamily(
        "txnwatch_transaction_transitions", "Observed coordinator state transitions.",
        labels=["cluster", "from_state", "to_state"]))
    events: dict[str, CounterMetricFamily] = field(default_factory=lambda: {
        key: CounterMetricFamily(name, doc, labels=["cluster"]) for key, (name, doc) in EVENT_COUNTERS.items()})

    def exposed(self) -> tuple[Metric, ...]:
        return (self.oldest_by_state, self.older_than, self.past_timeout, self.txn_age, self.txn_timeout,
                self.hanging_count, self.hanging_age, self.stalled, self.stall_duration, self.stalls, self.omitted,
                self.transitions, *self.events.values())


def describe_findings(views: list[ClusterView], now_s: float | None = None) -> Iterator[Metric]:
    """Families derived from detection findings and the per-cluster counters the collector keeps."""
    now_ms = (now_s if now_s is not None else time.time()) * 1000
    out = _Families()
    for view in views:
        _event_counters(view, out)
        _left_out(view, now_ms, out)
        if view.findings is not None:
            _hanging(view.name, view.findings, out)
            _stalls(view, view.findings, out)
    yield from out.exposed()


def _event_counters(view: ClusterView, out: _Families) -> None:
    """Coordinator history: exact from the transaction log when it is read, else what polling saw."""
    exact = view.history.counters if view.history.exact else None
    for event, family in out.events.items():
        source = exact if exact is not None and event in HISTORY_EVENTS else view.counters
        family.add_metric([view.name], source.get(event, 0))
    for key, value in sorted((exact if exact is not None else view.counters).items()):
        if key.startswith("transition:"):
            _, from_state, to_state = key.split(":", 2)
            out.transitions.add_metric([view.name, from_state, to_state], value)


def _left_out(view: ClusterView, now_ms: float, out: _Families) -> None:
    """What filters and caps left out (every kind, 0 when nothing), with the age families the top-50 cap cuts."""
    if view.snapshot is None and view.findings is None:
        return
    left_out = dict.fromkeys(OMITTED_KINDS, 0)
    if view.snapshot is not None:
        left_out[TRANSACTIONS_OVER_CAP] = _transaction_ages(view, now_ms, out)
    if view.findings is not None:
        left_out.update(view.findings.omitted)
    for (kind, reason), count in left_out.items():
        out.omitted.add_metric([view.name, kind, reason], count)


def _hanging(cluster: str, findings: Findings, out: _Families) -> None:
    out.past_timeout.add_metric([cluster], len(findings.overdue))
    out.hanging_count.add_metric([cluster], len(findings.hanging))
    for h in findings.hanging:
        out.hanging_age.add_metric([cluster, h.tp.topic, str(h.tp.partition), str(h.producer_id),
                                    h.transactional_id or "", h.reason.value, str(h.txn_start_offset)], h.age_ms / 1000)


def _stalls(view: ClusterView, findings: Findings, out: _Families) -> None:
    """One 0/1 series per watched partition, one duration series per active stall."""
    active = {s.tp: s for s in findings.lso_stalls}
    out.stalls.add_metric([view.name], len(active))
    for tp in (view.snapshot.partitions if view.snapshot else {}):
        out.stalled.add_metric((view.name, tp.topic, int_label(tp.partition)), 1.0 if tp in active else 0.0)
    for s in active.values():
        out.stall_duration.add_metric([view.name, s.tp.topic, str(s.tp.partition),
                                       "" if s.blocking_producer_id is None else str(s.blocking_producer_id),
                                       s.blocking_transactional_id or "", str(s.stalled_lso)],
                                      (s.last_seen_ms - s.started_ms) / 1000)


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


def _transaction_ages(view: ClusterView, now_ms: float, out: _Families) -> int:
    """Fills the age families; returns how many open transactions the top-50 cap left without a series."""
    assert view.snapshot is not None
    open_txns = [t for t in _one_view(view) if t.state in OPEN_STATES and t.start_time_ms is not None]
    ages = {t.transactional_id: max(0.0, (now_ms - (t.start_time_ms or 0)) / 1000) for t in open_txns}
    for state in OPEN_STATES:
        in_state = [ages[t.transactional_id] for t in open_txns if t.state is state]
        out.oldest_by_state.add_metric([view.name, state.value], max(in_state, default=0.0))
    for threshold in AGE_THRESHOLDS_S:
        out.older_than.add_metric([view.name, str(threshold)], sum(1 for age in ages.values() if age > threshold))
    for t in sorted(open_txns, key=lambda t: t.start_time_ms or 0)[:TOP_TRANSACTIONS]:
        out.txn_age.add_metric([view.name, t.transactional_id, t.state.value], ages[t.transactional_id])
        out.txn_timeout.add_metric([view.name, t.transactional_id], t.timeout_ms / 1000)
    return max(0, len(open_txns) - TOP_TRANSACTIONS)
