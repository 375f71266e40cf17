"""Offset and lag samples thinned once they are older than an hour or so: storage an operator can size.

At 15 s polls a cluster whose partitions move writes every partition every poll (store/offset_pictures.py):
2,009 partitions are ~1.7 GB a day in SQLite, and 5,000 kept group partitions at one lag sample per 300 s
another ~220 MB (docs/performance.md "Storage per day", issue 25).  What reads those rows at full resolution reads the
newest picture (the API's partitions and groups, incident context) or a recent chart; older history is
read for when an LSO was first pinned at an offset (the hanging card's "since"), for the HWM/LSO chart
and, from the Parquet archive (exported before this runs, at full resolution), for the pipeline.

So, for rows older than ``after`` (and newer than a lookback past it, so each run only reads what aged
since the last few runs), per cluster:

* ``partition_offsets``: a row stays if it is the first of its partition in its window of ``every``
  (aligned to the clock), or if its partition's LSO is pinned there (HWM > LSO) and the row before it
  was not pinned at that same LSO: the first sample of each pin, which is what "first pinned" reads.
  Old pictures are then no longer complete; nothing reads an old picture whole.
* ``lag_samples``: whole samples stay, the first of each window; each stays a complete picture of the
  kept groups at one ``sampled_at``, evenly spaced.

Bytes per day then follow from the window, not from the poll interval: docs/performance.md, "Storage
per day".  Rows newer than ``after`` are never touched, so every reader of the latest state answers
as before.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.core.epoch import to_ms
from txnwatch.store import models as m

#: How far before ``now - after`` each run looks: the job runs hourly, so two hours leave room for a late run.
LOOKBACK = timedelta(hours=2)


def _bucket(at: datetime, every_ms: int) -> int:
    return to_ms(at) // every_ms


def _aligned_start(cutoff: datetime, every: timedelta) -> datetime:
    """The start of the window holding ``cutoff - LOOKBACK``: each run sees whole windows, so "the first of
    its window" is the same row whichever run decides."""
    start = cutoff - LOOKBACK
    every_ms = int(every.total_seconds() * 1000)
    return start - timedelta(milliseconds=to_ms(start) % every_ms)


def _delete_ids(sessions: sessionmaker[Session], model: type[m.PartitionOffsetSample] | type[m.ConsumerLagSample],
                ids: list[int], batch: int) -> int:
    for i in range(0, len(ids), batch):
        with sessions.begin() as session:
            session.execute(delete(model).where(model.id.in_(ids[i:i + batch])))
    return len(ids)


def thin_offsets(session: Session, cluster_id: int, start: datetime, cutoff: datetime, every_ms: int) -> list[int]:
    """Ids of the partition offsets between ``start`` and ``cutoff`` that the rule above lets go."""
    P = m.PartitionOffsetSample
    rows = session.execute(
        select(P.id, P.topic, P.partition, P.sampled_at, P.high_watermark, P.last_stable_offset)
        .where(P.cluster_id == cluster_id, P.sampled_at >= start, P.sampled_at < cutoff)
        .order_by(P.topic, P.partition, P.sampled_at, P.id)).yield_per(10_000)
    dropped: list[int] = []
    last: tuple[str, int] | None = None
    bucket = prev_pin = None
    for row_id, topic, partition, at, hwm, lso in rows:
        pinned = lso if hwm is not None and lso is not None and hwm > lso else None
        this = _bucket(at, every_ms)
        if (topic, partition) != last or this != bucket:
            last, bucket = (topic, partition), this  # the first of its partition in its window
        elif pinned is None or pinned == prev_pin:
            dropped.append(row_id)
        prev_pin = pinned
    return dropped


def thin_lag(session: Session, cluster_id: int, start: datetime, cutoff: datetime, every_ms: int) -> list[datetime]:
    """The lag sample times between ``start`` and ``cutoff`` that are not the first of their window."""
    L = m.ConsumerLagSample
    times = session.scalars(select(L.sampled_at).where(L.cluster_id == cluster_id, L.sampled_at >= start,
                                                       L.sampled_at < cutoff).distinct().order_by(L.sampled_at))
    kept: set[int] = set()
    dropped: list[datetime] = []
    for at in times:
        bucket = _bucket(at, every_ms)
        if bucket in kept:
            dropped.append(at)
        kept.add(bucket)
    return dropped


def downsample(sessions: sessionmaker[Session], now: datetime, after: timedelta, every: timedelta,
               batch: int = 5_000, clusters: Iterable[int] | None = None) -> dict[str, int]:
    """Thin the samples older than ``after`` to the rule above; returns deleted row counts per table."""
    deleted = {m.PartitionOffsetSample.__tablename__: 0, m.ConsumerLagSample.__tablename__: 0}
    if every <= timedelta(0):
        return deleted
    every_ms = int(every.total_seconds() * 1000)
    cutoff = now - after
    start = _aligned_start(cutoff, every)
    with sessions() as session:
        ids = list(clusters) if clusters is not None else list(session.scalars(select(m.Cluster.id)))
    L = m.ConsumerLagSample
    for cluster_id in ids:
        with sessions() as session:
            offsets = thin_offsets(session, cluster_id, start, cutoff, every_ms)
            times = thin_lag(session, cluster_id, start, cutoff, every_ms)
        deleted[m.PartitionOffsetSample.__tablename__] += _delete_ids(sessions, m.PartitionOffsetSample, offsets,
                                                                      batch)
        for at in times:
            with sessions() as session:
                lag_ids = list(session.scalars(select(L.id).where(L.cluster_id == cluster_id, L.sampled_at == at)))
            deleted[L.__tablename__] += _delete_ids(sessions, L, lag_ids, batch)
    return deleted
