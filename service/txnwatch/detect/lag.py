"""Consumer lag that is true for read_committed groups: against the LSO, not the high watermark.

A read_committed consumer can never pass the LSO, so lag against the high watermark
(what Burrow, kafka_exporter, KMinion report) counts records it cannot read yet.

The control-marker rule.  A transaction ends on each of its partitions with one
commit/abort marker, which takes an offset but is never delivered.  After records at
offsets s..k and the marker at k+1, the high watermark and the LSO are k+2.  A Java
consumer that fetched the marker batch advances its position past it and commits k+2
(lag 0), but exactly-once applications usually commit ``last record offset + 1`` =
k+1 themselves (sendOffsetsToTransaction, Kafka Streams, the KIP-1050 example), and
so do consumers whose fetch ended before the marker was written.  Such a group has
read everything and shows a lag of exactly 1.  That 1 counts as 0 when the partition
provably ends with a marker: no producer has an open transaction there, and the
producer that wrote last (greatest ``lastTimestamp`` in DescribeProducers, which a
marker append updates) is transactional (coordinator epoch >= 0), so its last append
was its end marker.  Limits: non-idempotent producers are invisible to
DescribeProducers, so one writing after the marker could hide a real lag of 1; and
two markers back to back (two producers ending interleaved transactions) leave a
residual of 2, which is reported as lag.  Aborted records below the end are likewise
unreadable but still counted: only reading the log could tell, which the record lag does.

Record lag (``lag_records``): the data records a read_committed consumer still gets
before the LSO, counted by reading the partition as such a consumer does (kafka.record_count:
every control marker and every aborted transaction's record left out, wherever it lies).
Exact when present; absent while the bounded reads have not reached the LSO.

Time lag: the age of the first record the group has not consumed, ``now`` minus the
timestamp of the first data record at or after the committed offset (the kafka layer
fetches one record per lagging partition, bounded per poll and cached per offset).  That
is exact however long the LSO has been stalled: a group stuck at a stalled LSO shows the
age of the open transaction's first record, growing by the second.  With topics on
CreateTime the producer's clock sets the timestamp, so producer clock skew is the error;
LogAppendTime topics are exact.  When no record was fetched for a partition this poll
(the per-poll bound, a failed fetch) the estimate falls back to the LSO history: the first
poll whose LSO had passed the committed offset (resolution: the poll interval),
extrapolated at the LSO's average rate when the history does not reach back that far.
When the record was fetched but cannot be read (it lies past the decompression budget, as a
compression bomb's neighbours do, or its batch is damaged) the time lag is unknown, with
that reason (``GroupLag.lag_seconds_unknown``), rather than estimated.

Last commit: OffsetFetch carries no commit time, so txnwatch records the poll at which
it first saw a group partition's committed offset at its current value.  The commit
happened within one poll interval before that; a commit that does not move the offset
is not seen; and until the first change after txnwatch (or a new leader) started the
time is unknown and no value is reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from txnwatch.core.findings import GroupLag
from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, PartitionSnapshot, TopicPartition

LsoHistory = tuple[tuple[int, int], ...]  # (ms, lso), oldest first
CommitKey = tuple[str, TopicPartition]  # (group id, partition)
CommitSeen = tuple[int, int | None]  # (committed offset, ms it was first seen there, or None)


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
    """Seconds since the LSO first passed the committed offset.

    Read off the history when it reaches back that far.  Otherwise the LSO had passed
    the offset before the oldest sample, and the crossing is extrapolated back from it
    at the average rate the LSO advanced since: an estimate, never less than the
    history's own span.  None with fewer than two samples (no rate).
    """
    if not history:
        return None
    if history[-1][1] <= committed:
        return 0.0
    for (_, before), (at_ms, lso) in itertools.pairwise(history):
        if before <= committed < lso:
            return max(0.0, (now_ms - at_ms) / 1000)
    (first_ms, first_lso), (_, last_lso) = history[0], history[-1]
    if len(history) < 2 or now_ms <= first_ms or committed >= first_lso:
        return None
    per_ms = (last_lso - first_lso) / (now_ms - first_ms)
    if per_ms <= 0:  # the LSO went back (log truncation): no rate to trust
        return None
    return (now_ms - first_ms + (first_lso - committed) / per_ms) / 1000


def update_history(previous: Mapping[TopicPartition, LsoHistory], snapshot: ClusterSnapshot, now_ms: int,
                   keep: int) -> dict[TopicPartition, LsoHistory]:
    history: dict[TopicPartition, LsoHistory] = {}
    for tp, partition in snapshot.partitions.items():
        past = previous.get(tp, ())
        if partition.last_stable_offset is not None and (not past or past[-1][1] != partition.last_stable_offset):
            past = (*past, (now_ms, partition.last_stable_offset))[-keep:]
        history[tp] = past
    return history


def track_commits(previous: Mapping[CommitKey, CommitSeen], snapshot: ClusterSnapshot,
                  now_ms: int) -> dict[CommitKey, CommitSeen]:
    """(group, partition) -> (committed offset, poll at which it was first seen there, None if unknown).

    The first sighting after a start has no time: the offset may have been committed
    long before.  Group partitions that vanished are dropped.
    """
    seen: dict[CommitKey, CommitSeen] = {}
    for group in snapshot.groups.values():
        track_group_commits(seen, previous, group, now_ms)
    return seen


def track_group_commits(seen: dict[CommitKey, CommitSeen], previous: Mapping[CommitKey, CommitSeen],
                        group: GroupSnapshot, now_ms: int) -> None:
    """One group's entries of :func:`track_commits`, written into ``seen`` (detect/lag_reuse.py calls it for the
    groups whose offsets changed)."""
    for tp, offset in group.offsets.items():
        if offset is None or offset < 0:
            continue
        key = (group.group_id, tp)
        before = previous.get(key)
        if before is None:
            seen[key] = (offset, None)
        elif before[0] != offset:
            seen[key] = (offset, now_ms)
        else:
            seen[key] = before


def _seconds(snapshot: ClusterSnapshot, history: Mapping[TopicPartition, LsoHistory], tp: TopicPartition,
             committed: int, lag_hwm: int | None, lag_lso: int | None, now_ms: int) -> float | None:
    if lag_hwm == 0:
        return 0.0
    key = (tp, committed)
    if key in snapshot.unreadable_records:
        return None  # not estimated: the record the group waits on is there, it just cannot be read
    if key in snapshot.first_unconsumed_ms:
        timestamp_ms = snapshot.first_unconsumed_ms[key]
        return 0.0 if timestamp_ms is None else max(0.0, (now_ms - timestamp_ms) / 1000)
    if lag_lso is None:
        return None
    return 0.0 if lag_lso == 0 else time_lag_seconds(history.get(tp, ()), committed, now_ms)


def _records(snapshot: ClusterSnapshot, tp: TopicPartition, committed: int, lag_lso: int | None) -> int | None:
    """Records left to read, as counted by the kafka layer; 0 where nothing lies before the LSO but a marker."""
    if lag_lso == 0:
        return 0
    return snapshot.committed_records.get((tp, committed))


def group_rows(snapshot: ClusterSnapshot, group: GroupSnapshot, history: Mapping[TopicPartition, LsoHistory],
               now_ms: int, commits: Mapping[CommitKey, CommitSeen] | None = None) -> list[GroupLag]:
    """One group's rows of :func:`group_lags`."""
    rows: list[GroupLag] = []
    for tp, committed in sorted(group.offsets.items()):
        partition = snapshot.partitions.get(tp)
        if partition is None or committed is None or committed < 0:  # not watched, or no committed offset
            continue
        marker = _ends_with_marker(partition)
        lag_lso = _lag(partition.last_stable_offset, committed, marker)
        lag_hwm = _lag(partition.high_watermark, committed, marker)
        seen = (commits or {}).get((group.group_id, tp))
        seconds = _seconds(snapshot, history, tp, committed, lag_hwm, lag_lso, now_ms)
        rows.append(GroupLag(snapshot.cluster, group.group_id, tp, committed, lag_hwm, lag_lso, seconds,
                             seen[1] if seen is not None and seen[0] == committed else None,
                             snapshot.unreadable_records.get((tp, committed)) if seconds is None else None,
                             _records(snapshot, tp, committed, lag_lso)))
    return rows


def group_lags(snapshot: ClusterSnapshot, history: Mapping[TopicPartition, LsoHistory], now_ms: int,
               commits: Mapping[CommitKey, CommitSeen] | None = None) -> list[GroupLag]:
    """Every group's rows, computed afresh (detect.lag_reuse reuses the rows of groups nothing changed for)."""
    rows: list[GroupLag] = []
    for group in snapshot.groups.values():
        rows.extend(group_rows(snapshot, group, history, now_ms, commits))
    return rows
