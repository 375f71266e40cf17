"""What on-call needs around one partition's incident: its offsets now and over time, who reads it, its episodes.

Read-only, shaped for the (cluster_id, topic, partition, sampled_at) and
(cluster_id, sampled_at) indexes; used by the hanging and stall endpoints and the console.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, tuple_
from sqlalchemy.orm import Session

from txnwatch.store import models as m


@dataclass(frozen=True, slots=True)
class PartitionKey:
    cluster_id: int
    topic: str
    partition: int


def latest_sample(session: Session, key: PartitionKey) -> m.PartitionOffsetSample | None:
    P = m.PartitionOffsetSample
    return session.scalars(select(P).where(P.cluster_id == key.cluster_id, P.topic == key.topic,
                                           P.partition == key.partition)
                           .order_by(P.sampled_at.desc()).limit(1)).first()


# --- a page of incidents at once ---------------------------------------------------------------------------
# A page of 100 episodes asked these questions one partition at a time: 300-400 queries, ~90 ms of CPU for
# /api/v1/lso-stalls (benchmarks/api.py). Asked per page they are a handful of queries whatever the page size.


def _by_cluster(keys: Iterable[PartitionKey]) -> dict[int, list[PartitionKey]]:
    grouped: dict[int, list[PartitionKey]] = defaultdict(list)
    for key in dict.fromkeys(keys):
        grouped[key.cluster_id].append(key)
    return grouped


def _newest_poll(session: Session, model: type[m.PartitionOffsetSample] | type[m.ConsumerLagSample],
                 cluster_id: int) -> datetime | None:
    """When the cluster's latest poll wrote ``model``'s rows (a poll writes all of them at one time)."""
    return session.scalar(select(model.sampled_at).where(model.cluster_id == cluster_id)
                          .order_by(model.sampled_at.desc()).limit(1))


def latest_samples(session: Session, keys: Collection[PartitionKey]) -> dict[PartitionKey, m.PartitionOffsetSample]:
    """The latest offset sample of each partition: every poll writes all of a cluster's partitions at one
    ``sampled_at``, so their latest samples are at the cluster's newest time; a partition absent from that
    poll (its topic deleted since) is looked up on its own."""
    P = m.PartitionOffsetSample
    found: dict[PartitionKey, m.PartitionOffsetSample] = {}
    for cluster_id, wanted in _by_cluster(keys).items():
        at = _newest_poll(session, P, cluster_id)
        if at is not None:
            rows = session.scalars(select(P).where(P.cluster_id == cluster_id, P.sampled_at == at, tuple_(
                P.topic, P.partition).in_([(k.topic, k.partition) for k in wanted])))
            found.update({PartitionKey(cluster_id, r.topic, r.partition): r for r in rows})
        for key in wanted:
            if key not in found and (sample := latest_sample(session, key)) is not None:
                found[key] = sample
    return found


def first_pinned_many(session: Session, pins: Collection[tuple[PartitionKey, int]]) -> dict[tuple[PartitionKey, int],
                                                                                             datetime]:
    """For each (partition, offset): the first sample with the LSO at that offset and records above it, i.e.
    when txnwatch first saw the open transaction that starts there (its first write, to within a poll
    interval); absent once retention has removed those samples. One query."""
    if not pins:
        return {}
    wanted = [(k.cluster_id, k.topic, k.partition, lso) for k, lso in dict.fromkeys(pins)]
    P = m.PartitionOffsetSample
    rows = session.execute(
        select(P.cluster_id, P.topic, P.partition, P.last_stable_offset, func.min(P.sampled_at))
        .where(tuple_(P.cluster_id, P.topic, P.partition, P.last_stable_offset).in_(wanted),
               P.high_watermark > P.last_stable_offset)
        .group_by(P.cluster_id, P.topic, P.partition, P.last_stable_offset))
    return {(PartitionKey(cid, topic, partition), lso): at for cid, topic, partition, lso, at in rows
            if at is not None and lso is not None}


def groups_reading_many(session: Session, keys: Collection[PartitionKey]) -> dict[PartitionKey,
                                                                                 list[m.ConsumerLagSample]]:
    """The latest committed offsets of every group on each partition, by group id: one query per cluster."""
    L = m.ConsumerLagSample
    found: dict[PartitionKey, list[m.ConsumerLagSample]] = defaultdict(list)
    for cluster_id, wanted in _by_cluster(keys).items():
        at = _newest_poll(session, L, cluster_id)
        if at is None:
            continue
        for row in session.scalars(select(L).where(L.cluster_id == cluster_id, L.sampled_at == at, tuple_(
                L.topic, L.partition).in_([(k.topic, k.partition) for k in wanted])).order_by(L.group_id)):
            found[PartitionKey(cluster_id, row.topic, row.partition)].append(row)
    return dict(found)


def open_hanging_many(session: Session, keys: Collection[PartitionKey]) -> dict[PartitionKey, list[m.HangingEpisode]]:
    """Open hanging episodes on many partitions, newest first per partition (pick with :func:`pick_hanging`)."""
    if not keys:
        return {}
    H = m.HangingEpisode
    found: dict[PartitionKey, list[m.HangingEpisode]] = defaultdict(list)
    for row in session.scalars(select(H).where(
            tuple_(H.cluster_id, H.topic, H.partition).in_([(k.cluster_id, k.topic, k.partition)
                                                            for k in dict.fromkeys(keys)]),
            H.resolved_at.is_(None)).order_by(H.first_seen_at.desc())):
        found[PartitionKey(row.cluster_id, row.topic, row.partition)].append(row)
    return dict(found)


def pick_hanging(open_on: list[m.HangingEpisode], producer_id: int | None) -> m.HangingEpisode | None:
    """The newest open episode on the partition, of ``producer_id`` when one is given."""
    return next((h for h in open_on if producer_id is None or h.producer_id == producer_id), None)


def history(session: Session, key: PartitionKey, since: datetime, limit: int = 5000) -> list[m.PartitionOffsetSample]:
    """HWM and LSO over time, oldest first; the newest ``limit`` samples if there are more."""
    P = m.PartitionOffsetSample
    rows = list(session.scalars(select(P).where(P.cluster_id == key.cluster_id, P.topic == key.topic,
                                                P.partition == key.partition, P.sampled_at >= since)
                                .order_by(P.sampled_at.desc()).limit(limit)))
    return rows[::-1]


def episodes(session: Session, key: PartitionKey, since: datetime
             ) -> tuple[list[m.LsoStallEpisode], list[m.HangingEpisode]]:
    """Stall and hanging episodes of the partition that were open at or after ``since``."""
    S, H = m.LsoStallEpisode, m.HangingEpisode
    stalls = session.scalars(select(S).where(S.cluster_id == key.cluster_id, S.topic == key.topic,
                                             S.partition == key.partition, S.last_seen_at >= since)
                             .order_by(S.started_at))
    hanging = session.scalars(select(H).where(H.cluster_id == key.cluster_id, H.topic == key.topic,
                                              H.partition == key.partition, H.last_seen_at >= since)
                              .order_by(H.first_seen_at))
    return list(stalls), list(hanging)
