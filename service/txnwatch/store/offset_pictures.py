"""Which polls write their partition offsets: those that changed something, and one per interval besides.

Every poll used to write one ``partition_offsets`` row per watched partition: on a cluster of 2,009
partitions polled every 15 s that is 11.6 million rows and ~1.8 GB a day, most of them copies of the
row before (issue 25: the lab's database grew by hundreds of MB an hour while nothing was produced).

A poll writes its picture (all its partitions at one ``sampled_at``, which is what the readers rely
on: "the latest sample" is the cluster's newest ``sampled_at``) when it differs from the last picture
written for the cluster in any partition's leader, offsets or open transactions, or in which
partitions it holds, or when it is the first poll of its cluster in a heartbeat window aligned to the
clock (``floor(t / interval)``, as lag samples are).  So the newest written picture always equals the
latest poll's, and every reader answers what it answered when every poll was written: the latest
offsets, the first sample with an LSO pinned at an offset (a new pin is a change), the HWM/LSO chart
(a step that did not move is not drawn twice).  The heartbeat bounds how old the newest ``sampled_at``
gets, keeps the pipeline's hourly rollups fed with at least one sample each, and bounds how long a
database restored behind txnwatch's back shows offsets older than the last written ones.

The comparison is against the last picture this process *committed*, never one still buffered: a
poll dropped while the database was down cannot leave the database behind the memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from txnwatch.core.model import ClusterSnapshot

#: The columns of a partition's row that a poll can change (``sampled_at`` is the poll's time).
PICTURE_COLUMNS = ("topic", "partition", "leader", "high_watermark", "last_stable_offset", "log_start_offset",
                   "open_transactions")

Picture = tuple[tuple[Any, ...], ...]


def picture(snapshot: ClusterSnapshot) -> Picture:
    """What the snapshot's rows say, without their time, in (topic, partition) order: equal pictures are the
    same offsets.  Plain tuples, so a poll that writes nothing builds no row."""
    return tuple(sorted(
        (p.tp.topic, p.tp.partition, p.leader, p.high_watermark, p.last_stable_offset, p.log_start_offset,
         sum(1 for pr in (p.producers or ()) if pr.has_open_txn))
        for p in snapshot.partitions.values()))


def rows(shown: Picture, at: datetime) -> list[dict[str, Any]]:
    """The picture as ``partition_offsets`` rows sampled at ``at``."""
    return [dict(zip(PICTURE_COLUMNS, row, strict=True), sampled_at=at) for row in shown]


@dataclass(frozen=True)
class _Written:
    picture: Picture
    window: int


class OffsetPictures:
    """Per cluster, the last committed picture.  Used by the recorder only, under its flush lock."""

    def __init__(self, interval_s: Mapping[str, float] | None = None, default_s: float = 0.0) -> None:
        """``interval_s``: cluster → heartbeat seconds; 0 writes every poll's picture (as before issue 25)."""
        self._interval_ms = {name: round(s * 1000) for name, s in (interval_s or {}).items()}
        self._default_ms = round(default_s * 1000)
        self._written: dict[str, _Written] = {}

    def _window(self, cluster: str, at_ms: int) -> int | None:
        interval = self._interval_ms.get(cluster, self._default_ms)
        return None if interval <= 0 else at_ms // interval

    def due(self, cluster: str, shown: Picture, at_ms: int) -> bool:
        """True if the poll at ``at_ms`` showing ``shown`` writes its rows.  Changes nothing."""
        window = self._window(cluster, at_ms)
        last = self._written.get(cluster)
        return window is None or last is None or last.window != window or last.picture != shown

    def written(self, cluster: str, shown: Picture, at_ms: int) -> None:
        """The picture was committed."""
        window = self._window(cluster, at_ms)
        self._written[cluster] = _Written(shown, -1 if window is None else window)

    def forget(self) -> None:
        """The database may have come back restored: the next picture of every cluster is written."""
        self._written.clear()
