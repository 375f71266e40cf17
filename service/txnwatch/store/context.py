"""What on-call needs around one partition's incident: its offsets now and over time, who reads it, its episodes.

Read-only, shaped for the (cluster_id, topic, partition, sampled_at) and
(cluster_id, sampled_at) indexes; used by the hanging and stall endpoints and the console.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
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


def first_pinned_at(session: Session, key: PartitionKey, lso: int) -> datetime | None:
    """The first sample with the LSO at ``lso`` and records above it: when txnwatch first saw the open
    transaction that starts there, i.e. its first write to within a poll interval (None once retention
    has removed those samples)."""
    P = m.PartitionOffsetSample
    return session.scalar(select(P.sampled_at).where(
        P.cluster_id == key.cluster_id, P.topic == key.topic, P.partition == key.partition,
        P.last_stable_offset == lso, P.high_watermark > lso).order_by(P.sampled_at).limit(1))


def groups_reading(session: Session, key: PartitionKey) -> list[m.ConsumerLagSample]:
    """The latest committed offsets of every group on the partition (one poll writes them all at one time)."""
    L = m.ConsumerLagSample
    at = session.scalar(select(L.sampled_at).where(L.cluster_id == key.cluster_id)
                        .order_by(L.sampled_at.desc()).limit(1))
    if at is None:
        return []
    return list(session.scalars(select(L).where(L.cluster_id == key.cluster_id, L.sampled_at == at,
                                                L.topic == key.topic, L.partition == key.partition)
                                .order_by(L.group_id)))


def open_hanging_on(session: Session, key: PartitionKey, producer_id: int | None) -> m.HangingEpisode | None:
    H = m.HangingEpisode
    stmt = select(H).where(H.cluster_id == key.cluster_id, H.topic == key.topic, H.partition == key.partition,
                           H.resolved_at.is_(None))
    if producer_id is not None:
        stmt = stmt.where(H.producer_id == producer_id)
    return session.scalars(stmt.order_by(H.first_seen_at.desc()).limit(1)).first()


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
