"""Group lag rows paid for by what changed: a group whose rows cannot have changed keeps last poll's.

Consumer lag is the biggest part of a poll's detection on a cluster with many groups: the issue-25 lab
(2,009 partitions, 300 groups on 12,006 group partitions, nothing produced) spent ~0.16 CPU-s a poll
building the same 24,000 rows (txnwatch's and kafka_exporter's) it had built 15 s before.

A group's rows are a function of its committed offsets, of the offsets and producers of the partitions
it reads, of what it committed when (``lag.track_commits``, unchanged while its offsets are) and, for a
partition it lags on, of the clock (time lag grows) and of the records read for it this poll.  So:

* txnwatch's rows (:func:`lag.group_rows`) are kept when the group's offsets equal last poll's, none of
  its partitions changed its high watermark, LSO or producers (or came or went), and every kept row had
  a lag of 0 against the high watermark (then its time lag is 0, its record lag 0 and nothing depends on
  the clock or on this poll's record reads);
* kafka_exporter's rows (:func:`exporter.group_exporter_rows`) are kept when the group's offsets equal
  last poll's and no partition of a topic it reads changed its high watermark or came or went.

Everything else is computed afresh, by the same functions the full path uses, so the findings are equal
to :func:`lag.group_lags` and :func:`exporter.exporter_lags` (tests/unit/detect/test_lag_reuse.py replays
random poll sequences through both).  The memo holds references to the current snapshot's mappings and
findings' rows only: it costs no copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from txnwatch.core.findings import ExporterLag, GroupLag
from txnwatch.core.model import ClusterSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.detect import exporter, lag


@dataclass(frozen=True, slots=True)
class GroupMemo:
    """One group's rows as last computed, and the offsets they were computed from."""

    offsets: Mapping[TopicPartition, int]
    #: None when some row lagged: those depend on the clock, and are computed every poll.
    lags: tuple[GroupLag, ...] | None
    exporter: tuple[ExporterLag, ...]


@dataclass(frozen=True, slots=True)
class LagMemo:
    """What the next poll compares with: last poll's partitions and each group's rows."""

    partitions: Mapping[TopicPartition, PartitionSnapshot]
    groups: Mapping[str, GroupMemo]


EMPTY = LagMemo({}, {})


def _changed(previous: Mapping[TopicPartition, PartitionSnapshot],
             current: Mapping[TopicPartition, PartitionSnapshot]) -> tuple[set[TopicPartition], set[str]]:
    """Partitions whose HWM, LSO or producers changed, came or went; and the topics whose HWMs did."""
    lags: set[TopicPartition] = set(previous.keys() - current.keys())
    topics = {tp.topic for tp in lags}
    for tp, part in current.items():
        before = previous.get(tp)
        if before is None:
            lags.add(tp)
            topics.add(tp.topic)
            continue
        if before.high_watermark != part.high_watermark:
            lags.add(tp)
            topics.add(tp.topic)
        elif before.last_stable_offset != part.last_stable_offset or before.producers != part.producers:
            lags.add(tp)
    return lags, topics


def track_commits(memo: LagMemo, previous: Mapping[lag.CommitKey, lag.CommitSeen], snapshot: ClusterSnapshot,
                  now_ms: int) -> dict[lag.CommitKey, lag.CommitSeen]:
    """Equal to ``lag.track_commits(previous, snapshot, now_ms)`` when ``memo`` and ``previous`` come from the same
    poll: a group whose offsets equal its memo's keeps its entries as they are (the dictionary is copied whole,
    without hashing its keys again), and only the other groups' entries are taken out and worked out anew."""
    seen = dict(previous)
    current = snapshot.groups
    for group_id, before in memo.groups.items():
        group = current.get(group_id)
        if group is None or group.offsets != before.offsets:
            for tp in before.offsets:
                seen.pop((group_id, tp), None)
    fresh = [g for g in current.values() if (b := memo.groups.get(g.group_id)) is None or b.offsets != g.offsets]
    if not memo.groups:  # no memo (first poll, resumed state): nothing in ``seen`` is known to be this poll's
        seen = {}
    for group in fresh:
        lag.track_group_commits(seen, previous, group, now_ms)
    return seen


def group_lags(memo: LagMemo, snapshot: ClusterSnapshot, history: Mapping[TopicPartition, lag.LsoHistory],
               now_ms: int, commits: Mapping[lag.CommitKey, lag.CommitSeen],
               ) -> tuple[list[GroupLag], list[ExporterLag], LagMemo]:
    """Equal to ``(lag.group_lags(...), exporter.exporter_lags(snapshot))``; and the memo for the next poll."""
    changed_tps, changed_topics = _changed(memo.partitions, snapshot.partitions)
    partitions_of = exporter.partitions_by_topic(snapshot)
    memos: dict[str, GroupMemo] = {}
    lag_rows: list[GroupLag] = []
    for group in snapshot.groups.values():
        before = memo.groups.get(group.group_id)
        same_offsets = before is not None and before.offsets == group.offsets
        if same_offsets and before is not None and before.lags is not None \
                and changed_tps.isdisjoint(group.offsets):
            rows: tuple[GroupLag, ...] = before.lags
        else:
            rows = tuple(lag.group_rows(snapshot, group, history, now_ms, commits))
        if same_offsets and before is not None and (not changed_topics or changed_topics.isdisjoint(
                tp.topic for tp in group.offsets)):
            exported = before.exporter
        else:
            exported = tuple(exporter.group_exporter_rows(snapshot, group, partitions_of))
        lag_rows.extend(rows)
        memos[group.group_id] = GroupMemo(group.offsets, rows if all(r.lag_hwm == 0 for r in rows) else None,
                                          exported)
    exporter_rows: list[ExporterLag] = []
    for group_id in sorted(memos):
        exporter_rows.extend(memos[group_id].exporter)
    return lag_rows, exporter_rows, LagMemo(snapshot.partitions, memos)
