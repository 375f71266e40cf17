"""History gaps: offsets of ``__transaction_state`` that compaction removed before the tail read them.

``__transaction_state`` is compacted (``cleanup.policy=compact``): the cleaner keeps only each
transactional id's newest record, outside the active segment.  A tail that keeps up reads every
record before it is cleaned; a daemon that was down (or a tail that fell behind) resumes at a
stored offset whose successors may have been cleaned away, and the transitions they carried
(a commit, an abort, an epoch bump) are lost for good: the per-id state is still right (the
newest record survives), but the counters of that span are lower bounds.

The topic holds no transactional data and no control batches, so its offsets are dense when
written: any offset the tail expected but did not get was removed by the cleaner (or, if the
log start moved past it, by deletion).  That is the whole rule: a record whose offset is past
the next offset expected on its partition opens a gap from the expected offset to just
before it.  Pure: no Kafka, no clock of its own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from txnwatch.core.model import TxnLogRecord
from txnwatch.core.views import HistoryGap
from txnwatch.detect.txnlog_rules import IdState


@dataclass(frozen=True, slots=True)
class GapWatch:
    """What the tail expects next per partition it checks, and the time of the last record read there."""

    expected: Mapping[int, int]
    last_ms: Mapping[int, int | None]


def find_gaps(watch: GapWatch, records: Iterable[TxnLogRecord]) -> tuple[GapWatch, list[HistoryGap]]:
    """Gaps among ``records`` (in log order per partition) against what ``watch`` expects.

    Partitions absent from ``watch.expected`` are not checked: the tail started there with no
    stored position, at the log start, where earlier history was never txnwatch's to miss.
    """
    expected, last_ms = dict(watch.expected), dict(watch.last_ms)
    gaps: list[HistoryGap] = []
    for record in records:
        partition, offset = record.log_partition, record.offset
        if partition not in expected:
            continue
        wanted = expected[partition]
        if offset > wanted:
            gaps.append(HistoryGap(partition, wanted, offset - 1, last_ms.get(partition), record.timestamp_ms))
        if offset >= wanted:
            expected[partition] = offset + 1
            last_ms[partition] = record.timestamp_ms
    return GapWatch(expected, last_ms), gaps


def start_watch(stored: Mapping[int, int], ids: Iterable[IdState]) -> GapWatch:
    """What a tail resuming at ``stored`` expects: each stored position, and as the time before it the
    newest record the stored state remembers on that partition (the id at the highest offset there)."""
    newest: dict[int, tuple[int, int]] = {}
    for state in ids:
        if state.log_partition in stored and state.offset < stored[state.log_partition]:
            seen = newest.get(state.log_partition)
            if seen is None or state.offset > seen[0]:
                newest[state.log_partition] = (state.offset, state.last_update_ms)
    return GapWatch(dict(stored), {p: newest[p][1] if p in newest else None for p in stored})


def watch_everything(watch: GapWatch, positions: Mapping[int, int]) -> GapWatch:
    """Once the tail has caught up, every partition is checked from where it stands."""
    return GapWatch({**positions, **watch.expected}, {**dict.fromkeys(positions), **watch.last_ms})
