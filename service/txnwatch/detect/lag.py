"""Consumer lag that is true for read_committed groups: against the LSO, not the high watermark.

A read_committed consumer can never pass the LSO, so lag against the high watermark
(what Burrow, kafka_exporter, KMinion report) counts records it cannot read yet as
lag.  And a transactional producer's last action on a partition is always a control
marker: a consumer that has read every record sits one offset short of the end, a
phantom lag of 1.  When the partition has no open transaction and its most recent
writer is transactional, that residual 1 is the marker and counts as 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from txnwatch.model import ClusterSnapshot, GroupLag, PartitionSnapshot, TopicPartition

LsoHistory = tuple[tuple[int, int], ...]  # (ms, lso), oldest first


def _ends_with_marker(partition: PartitionSnapshot) -> bool:
    producers = partition.producers
    if not producers or any(p.has_open_txn for p in producers):
        return False
    latest = max(producers, key=lambda p: p.last_timestamp_ms or -1)
    return latest.coordinator_epoch >= 0  # only transactional producers have a coordinator epoch


def _lag(end: int | None, committed: int, marker_at_end: bool) -> int | None:
    if end is None:
        return None
    lag = max(0, end - committed)
    return 0 if lag == 1 and marker_at_end else lag


def time_lag_seconds(history: Sequence[tuple[int, int]], committed: int, now_ms: int) -> float | None:
    """Seconds since the LSO first passed the committed offset, if the history reaches back that far."""
    if not history:
        return None
    if history[-1][1] <= committed:
        return 0.0
    for (_, before), (at_ms, lso) in zip(history, history[1:]):
        if before <= committed < lso:
            return max(0.0, (now_ms - at_ms) / 1000)
    return None


def update_history(previous: Mapping[TopicPartition, LsoHistory], snapshot: ClusterSnapshot, now_ms: int,
                   keep: int) -> dict[TopicPartition, LsoHistory]:
    history: dict[TopicPartition, LsoHistory] = {}
    for tp, partition in snapshot.partitions.items():
        past = previous.get(tp, ())
        if partition.last_stable_offset is not None and (not past or past[-1][1] != partition.last_stable_offset):
            past = (*past, (now_ms, partition.last_stable_offset))[-keep:]
        history[tp] = past
    return history


def group_lags(snapshot: ClusterSnapshot, history: Mapping[TopicPartition, LsoHistory], now_ms: int) -> list[GroupLag]:
    rows: list[GroupLag] = []
    for group in snapshot.groups.values():
        for tp, committed in sorted(group.offsets.items()):
            partition = snapshot.partitions.get(tp)
            if partition is None:
                continue
            marker = _ends_with_marker(partition)
            lag_lso = _lag(partition.last_stable_offset, committed, marker)
            seconds = (None if lag_lso is None else 0.0 if lag_lso == 0
                       else time_lag_seconds(history.get(tp, ()), committed, now_ms))
            rows.append(GroupLag(snapshot.cluster, group.group_id, tp, committed,
                                 _lag(partition.high_watermark, committed, marker), lag_lso, seconds))
    return rows
