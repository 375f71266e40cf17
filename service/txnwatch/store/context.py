"""What on-call needs around one partition's incident: its offsets now and over time, who reads it, its episodes.

Read-only, shaped for the (cluster_id, topic, partition, sampled_at) and
(cluster_id, sampled_at) indexes; used by the hanging and stall endpoints and the console.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import BigInteger, ColumnElement, Integer, Row, String, Table, false, func, literal, select, tuple_
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Session
from sqlalchemy.types import TypeEngine

from txnwatch.store import models as m


class PartitionKey(NamedTuple):
    """A partition of a cluster; a NamedTuple because a page hashes hundreds of them (C-level hash)."""

    cluster_id: int
    topic: str
    partition: int


# --- a page of incidents at once ---------------------------------------------------------------------------
# A page of 100 episodes asked these questions one partition at a time: 300-400 queries, ~90 ms of CPU for
# /api/v1/lso-stalls (benchmarks/api.py). Asked per page they are a handful of queries whatever the page size.
# They return Core rows (attribute access like the models): ORM instances cost more than the query on a page.


def _among(session: Session, columns: Sequence[ColumnElement[Any]], values: Sequence[tuple[Any, ...]],
           types: Sequence[TypeEngine[Any]]) -> ColumnElement[bool]:
    """``(columns...) IN values``. On PostgreSQL each column's values travel as one array, unnested in a
    subquery: the statement's text is the same whatever the page holds, so SQLAlchemy's compiled cache,
    psycopg's parsed queries and its prepared statements all apply. An IN list of N tuples is N × k
    parameters, rendered and parsed anew on every request (~2 ms of CPU on a 100-episode page)."""
    if not values:
        return false()
    if session.get_bind().dialect.name != "postgresql":
        return tuple_(*columns).in_(values)
    arrays = [literal([v[i] for v in values], ARRAY(t)) for i, t in enumerate(types)]
    return tuple_(*columns).in_(select(*(func.unnest(a) for a in arrays)))


def _partitions_among(session: Session, table: Table, wanted: Sequence[PartitionKey]) -> ColumnElement[bool]:
    """``table``'s (topic, partition) is one of ``wanted``'s (all of one cluster)."""
    return _among(session, (table.c.topic, table.c.partition), [(k.topic, k.partition) for k in wanted],
                  (String(), Integer()))


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


def latest_samples(session: Session, keys: Collection[PartitionKey]) -> dict[PartitionKey, Row[Any]]:
    """The latest offset sample of each partition (a row of partition_offsets): every poll writes all of a
    cluster's partitions at one ``sampled_at``, so their latest samples are at the cluster's newest time; a
    partition absent from that poll (its topic deleted since) is looked up on its own."""
    P = m.PartitionOffsetSample
    table = m.table(P)
    found: dict[PartitionKey, Row[Any]] = {}
    for cluster_id, wanted in _by_cluster(keys).items():
        at = _newest_poll(session, P, cluster_id)
        if at is not None:
            rows = session.execute(select(table).where(
                table.c.cluster_id == cluster_id, table.c.sampled_at == at,
                _partitions_among(session, table, wanted))).all()
            found.update({PartitionKey(cluster_id, r.topic, r.partition): r for r in rows})
        for key in wanted:
            if key not in found:
                latest = session.execute(select(table).where(
                    table.c.cluster_id == key.cluster_id, table.c.topic == key.topic,
                    table.c.partition == key.partition).order_by(table.c.sampled_at.desc()).limit(1)).first()
                if latest is not None:
                    found[key] = latest
    return found


def first_pinned_many(session: Session, pins: Collection[tuple[PartitionKey, int]]) -> dict[tuple[PartitionKey, int],
                                                                                             datetime]:
    """For each (partition, offset): the first sample with the LSO at that offset and records above it, i.e.
    when txnwatch first saw the open transaction that starts there (its first write, to within a poll
    interval); absent once retention has removed those samples. One query."""
    if not pins:
        return {}
    wanted = [(k.cluster_id, k.topic, k.partition, lso) for k, lso in dict.fromkeys(pins)]
    P = m.table(m.PartitionOffsetSample).c
    rows = session.execute(
        select(P.cluster_id, P.topic, P.partition, P.last_stable_offset, func.min(P.sampled_at))
        .where(_among(session, (P.cluster_id, P.topic, P.partition, P.last_stable_offset), wanted,
                      (BigInteger(), String(), Integer(), BigInteger())),
               P.high_watermark > P.last_stable_offset)
        .group_by(P.cluster_id, P.topic, P.partition, P.last_stable_offset))
    return {(PartitionKey(cid, topic, partition), lso): at for cid, topic, partition, lso, at in rows
            if at is not None and lso is not None}


def groups_reading_many(session: Session, keys: Collection[PartitionKey]) -> dict[PartitionKey, list[Row[Any]]]:
    """The latest committed offsets of every group on each partition (rows of consumer_lag), by group id:
    one query per cluster."""
    table = m.table(m.ConsumerLagSample)
    found: dict[PartitionKey, list[Row[Any]]] = defaultdict(list)
    for cluster_id, wanted in _by_cluster(keys).items():
        at = _newest_poll(session, m.ConsumerLagSample, cluster_id)
        if at is None:
            continue
        for row in session.execute(select(table).where(
                table.c.cluster_id == cluster_id, table.c.sampled_at == at,
                _partitions_among(session, table, wanted)).order_by(table.c.group_id)).all():
            found[PartitionKey(cluster_id, row.topic, row.partition)].append(row)
    return dict(found)


def open_hanging_many(session: Session, keys: Collection[PartitionKey]) -> dict[PartitionKey, list[Row[Any]]]:
    """Open hanging episodes on many partitions (rows of hanging_txns), newest first per partition (pick
    with :func:`pick_hanging`)."""
    if not keys:
        return {}
    table = m.table(m.HangingEpisode)
    found: dict[PartitionKey, list[Row[Any]]] = defaultdict(list)
    for row in session.execute(select(table).where(
            _among(session, (table.c.cluster_id, table.c.topic, table.c.partition),
                   [(k.cluster_id, k.topic, k.partition) for k in dict.fromkeys(keys)],
                   (BigInteger(), String(), Integer())),
            table.c.resolved_at.is_(None)).order_by(table.c.first_seen_at.desc())).all():
        found[PartitionKey(row.cluster_id, row.topic, row.partition)].append(row)
    return dict(found)


def pick_hanging(open_on: list[Row[Any]], producer_id: int | None) -> Row[Any] | None:
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
