"""Reused group rows are the rows the full path computes, poll after poll (issue 25: pay for change)."""

from __future__ import annotations

import dataclasses
import random

import pytest

from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, PartitionSnapshot, ProducerState, TopicPartition
from txnwatch.detect import INITIAL, DetectorState, evaluate, lag, lag_reuse

TPS = [TopicPartition(t, p) for t in ("a", "b", "c") for p in range(3)]


def _producers(open_at: int | None, last_ms: int, transactional: bool) -> tuple[ProducerState, ...]:
    return (ProducerState(producer_id=7, producer_epoch=0, last_sequence=3, last_timestamp_ms=last_ms,
                          coordinator_epoch=0 if transactional else -1,
                          current_txn_start_offset=open_at),)


class _Cluster:
    """A cluster that mostly idles: now and then a partition moves, a transaction opens or ends, a producer's
    state expires, a group commits (sometimes catching up), a group or a partition goes away and comes back."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.hwm = dict.fromkeys(TPS, 100)
        self.open: dict[TopicPartition, int | None] = dict.fromkeys(TPS)
        self.last_ms = dict.fromkeys(TPS, 0)
        self.groups = {f"g{i}": dict.fromkeys(self.rng.sample(TPS, self.rng.randint(1, 4)), 100) for i in range(8)}
        self.gone_group: str | None = None
        self.gone_tp: TopicPartition | None = None
        self.expired: set[TopicPartition] = set()

    def poll(self, at_ms: int) -> ClusterSnapshot:
        rng = self.rng
        if rng.random() < 0.3:
            tp = rng.choice(TPS)
            self.hwm[tp] += rng.randint(1, 3)
            self.last_ms[tp] = at_ms
        if rng.random() < 0.1:
            tp = rng.choice(TPS)
            self.open[tp] = None if self.open[tp] is not None else self.hwm[tp]
            self.hwm[tp] += 1  # the marker, or the first record
        if rng.random() < 0.3:
            offsets = self.groups[rng.choice(sorted(self.groups))]
            tp = rng.choice(sorted(offsets))
            roll = rng.random()
            # Caught up; caught up to the last record before a marker (lag 1 that counts as 0); lagging.
            offsets[tp] = self.hwm[tp] if roll < 0.4 else self.hwm[tp] - 1 if roll < 0.7 else \
                max(0, self.hwm[tp] - rng.randint(1, 5))
        if rng.random() < 0.1:  # a group's offsets on a partition are deleted, or it starts reading one
            offsets = self.groups[rng.choice(sorted(self.groups))]
            tp = rng.choice(TPS)
            if tp in offsets and len(offsets) > 1:
                del offsets[tp]
            else:
                offsets[tp] = self.hwm[tp]
        if rng.random() < 0.1:  # a producer's state expires (or is back): only DescribeProducers changes
            self.expired ^= {rng.choice(TPS)}
        if rng.random() < 0.05:
            self.gone_group = None if self.gone_group else rng.choice(sorted(self.groups))
        if rng.random() < 0.05:
            self.gone_tp = None if self.gone_tp else rng.choice(TPS)
        parts = {tp: PartitionSnapshot(tp, leader=1, high_watermark=self.hwm[tp],
                                       last_stable_offset=self.hwm[tp] if self.open[tp] is None else self.open[tp],
                                       log_start_offset=0,
                                       producers=() if tp in self.expired else
                                       _producers(self.open[tp], self.last_ms[tp], tp.partition != 2))
                 for tp in TPS if tp != self.gone_tp}
        groups = {g: GroupSnapshot(g, "Stable", "consumer", dict(offsets))
                  for g, offsets in self.groups.items() if g != self.gone_group}
        lagging = [(tp, c) for o in self.groups.values() for tp, c in o.items() if c < self.hwm[tp]]
        first = {key: at_ms - 5_000 for key in lagging if rng.random() < 0.5}
        counted = {key: self.hwm[key[0]] - key[1] for key in lagging if rng.random() < 0.5}
        return ClusterSnapshot(cluster="c", taken_at_ms=at_ms, duration_ms=5, partitions=parts, groups=groups,
                               first_unconsumed_ms=first, committed_records=counted)


@pytest.mark.parametrize("seed", range(8))
def test_findings_equal_the_full_path_poll_after_poll(seed: int) -> None:
    cluster = _Cluster(seed)
    reusing: DetectorState = INITIAL
    full: DetectorState = INITIAL
    reused_rows = 0
    for k in range(200):
        at = 1_700_000_000_000 + k * 15_000
        snap = cluster.poll(at)
        before, commits_before = dict(reusing.lag_memo.groups), reusing.commits
        reusing, found = evaluate(reusing, snap, at)
        assert reusing.commits == lag.track_commits(commits_before, snap, at), f"poll {k}"
        full, expected = evaluate(dataclasses.replace(full, lag_memo=lag_reuse.EMPTY), snap, at)
        assert found == expected, f"poll {k}"
        reused_rows += sum(1 for g, memo in reusing.lag_memo.groups.items()
                           if g in before and memo.lags is not None and memo.lags is before[g].lags)
    assert reused_rows > 50  # caught-up groups on idle partitions kept their rows: the reuse path was taken


def test_an_idle_cluster_rebuilds_no_row() -> None:
    tp = TopicPartition("a", 0)
    snap = ClusterSnapshot(cluster="c", taken_at_ms=0, duration_ms=5, partitions={
        tp: PartitionSnapshot(tp, leader=1, high_watermark=10, last_stable_offset=10, producers=())},
        groups={"g": GroupSnapshot("g", "Stable", "consumer", {tp: 10})})
    state, first = evaluate(INITIAL, snap, 0)
    state, second = evaluate(state, dataclasses.replace(snap, taken_at_ms=15_000), 15_000)
    assert second.lags[0] is first.lags[0] and second.exporter_lags[0] is first.exporter_lags[0]
    # A lagging group's rows are rebuilt every poll: its time lag grows with the clock.
    lagging = dataclasses.replace(snap, groups={"g": GroupSnapshot("g", "Stable", "consumer", {tp: 8})})
    state, third = evaluate(state, lagging, 30_000)
    state, fourth = evaluate(state, lagging, 45_000)
    assert fourth.lags[0] is not third.lags[0] and fourth.exporter_lags[0] is third.exporter_lags[0]
