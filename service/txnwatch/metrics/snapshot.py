"""/metrics straight from the latest snapshot: transactional ids by state, the oldest open one, partition offsets.

Nothing here is derived by detection (that is metrics/findings.py): these are what the coordinators
and the partition leaders answered in the latest poll.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from txnwatch.core.model import ClusterSnapshot, TopicPartition
from txnwatch.core.views import LatestState
from txnwatch.core.vocabulary import TxnState
from txnwatch.metrics.render import LeanGauge, int_label

#: The labels of a partition's series (here and the LSO-stall gauge of metrics/findings.py).
PARTITION = ["cluster", "topic", "partition"]


class SnapshotCollector(Collector):
    """Series that come straight from the latest snapshot: transactions, offsets, group offsets."""

    def __init__(self, state: LatestState, clock: Callable[[], float] = time.time) -> None:
        self._state, self._clock = state, clock
        # A partition's label values, kept across renders (issue 25): the same tuple objects render after
        # render make the family cache's row compare an identity check, and spare a tuple per partition.
        # Replaced whole at the end of a collect: two collects at once only cache less.
        self._labels: dict[str, dict[TopicPartition, tuple[str, str, str]]] = {}

    def collect(self) -> Iterator[Metric]:
        by_state = LeanGauge("txnwatch_transactions", "Transactional ids known to the coordinators, by state.",
                             ["cluster", "state"])
        oldest = LeanGauge("txnwatch_transaction_oldest_open_age_seconds",
                           "Age of the oldest open transaction (Ongoing or Prepare*).", ["cluster"])
        lso = LeanGauge("txnwatch_partition_last_stable_offset",
                        "Last stable offset: read_committed consumers never read past it.", PARTITION)
        gap = LeanGauge("txnwatch_partition_lso_gap",
                        "High watermark minus LSO: what read_committed consumers cannot see yet.", PARTITION)
        open_txns = LeanGauge("txnwatch_partition_open_transactions",
                              "Producers with an open transaction on the partition (DescribeProducers).", PARTITION)
        now_ms = self._clock() * 1000
        labels_now: dict[str, dict[TopicPartition, tuple[str, str, str]]] = {}
        for view in self._state.views():
            snap = view.snapshot
            if snap is None:
                continue
            _transactions(view.name, snap, now_ms, by_state, oldest)
            labels_now[view.name] = _partitions(view.name, snap, self._labels.get(view.name, {}), lso, gap, open_txns)
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


def _partitions(cluster: str, snap: ClusterSnapshot, known: dict[TopicPartition, tuple[str, str, str]],
                lso: LeanGauge, gap: LeanGauge, open_txns: LeanGauge) -> dict[TopicPartition, tuple[str, str, str]]:
    """The partition families' rows; returns the label tuples used, to be used again by the next render.

    Rows are appended directly, not through add_metric: ~6,000 rows a render on the issue's lab, and every row
    here has the families' three label values by construction."""
    kept: dict[TopicPartition, tuple[str, str, str]] = {}
    lso_rows, lso_values = lso.rows, lso.values
    gap_rows, gap_values = gap.rows, gap.values
    open_rows, open_values = open_txns.rows, open_txns.values
    for p in snap.partitions.values():
        tp = p.tp
        labels = known.get(tp)
        if labels is None:
            labels = (cluster, tp.topic, int_label(tp.partition))  # one tuple for the three families
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
    return kept
