"""Findings as history rows: append-only samples, and episodes kept in step with detection.

Episodes (hanging transactions, LSO stalls) are synchronised rather than appended:
each poll refreshes the open episode of every incident still active, opens one for
a new incident, and closes open episodes whose incident is gone.  Matching is by
incident (not by start time), so a leader change that restarts detection continues
the same episode instead of leaving a stale open row behind; and an incident that
could not be decided this poll is neither refreshed nor closed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Table, bindparam, select, update
from sqlalchemy.orm import Session

from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.core.findings import Findings, incident_key
from txnwatch.core.model import ClusterSnapshot
from txnwatch.store import models as m


@dataclass
class EpisodeSync:
    """Open incidents of one kind after this poll; ``undecided`` keys are left as they are."""

    model: type[m.HangingEpisode] | type[m.LsoStallEpisode]
    active: dict[str, dict[str, Any]]
    undecided: set[str] = field(default_factory=set)


def _stall_key(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def findings_rows(snapshot: ClusterSnapshot | None, findings: Findings | None,
                  at: datetime) -> tuple[list[tuple[Table, list[dict[str, Any]]]], list[EpisodeSync]]:
    if snapshot is None or findings is None:
        return [], []
    at_ms = to_ms(at)
    transitions = [dict(
        source=t.source.value, transactional_id=t.transactional_id, at_ms=at_ms, staged_at_ms=at_ms,
        from_state=t.from_state, to_state=t.to_state, producer_id=t.producer_id, producer_epoch=t.producer_epoch,
        prev_producer_id=t.prev_producer_id, prev_producer_epoch=t.prev_producer_epoch, timeout_ms=t.timeout_ms,
        start_ms=t.start_ms, partitions=m.joined(sorted(f"{topic}-{p}" for topic, p in t.partitions)),
        events=m.joined(t.events), duration_ms=t.duration_ms) for t in findings.transitions]
    verification = [dict(topic=v.tp.topic, partition=v.tp.partition, producer_id=v.producer_id,
                         transactional_id=v.transactional_id, observed_at=at, verification_ms=v.verification_ms,
                         failed=v.failed) for v in findings.verification.samples]
    lags = [dict(group_id=g.group_id, topic=g.tp.topic, partition=g.tp.partition, sampled_at=at,
                 committed_offset=g.committed, lag_hwm=g.lag_hwm, lag_lso=g.lag_lso, lag_seconds=g.lag_seconds,
                 lag_seconds_unknown=None if g.lag_seconds_unknown is None else str(g.lag_seconds_unknown)[:500],
                 lag_records=g.lag_records)
            for g in findings.lags]
    hanging = EpisodeSync(m.HangingEpisode, {h.incident_key: dict(
        incident_key=h.incident_key, topic=h.tp.topic, partition=h.tp.partition, producer_id=h.producer_id,
        producer_epoch=h.producer_epoch, transactional_id=h.transactional_id, coordinator_id=h.coordinator_id,
        reason=h.reason.value, txn_start_offset=h.txn_start_offset, last_write_at=from_ms(h.last_timestamp_ms),
        first_seen_at=at, last_seen_at=at) for h in findings.hanging},
        undecided={incident_key(snapshot.cluster, u.tp, u.producer_id) for u in findings.undetermined
                   if u.producer_id is not None})  # a leader that did not answer names no producer: no episode
    stalls = EpisodeSync(m.LsoStallEpisode, {_stall_key(s.tp.topic, s.tp.partition): dict(
        topic=s.tp.topic, partition=s.tp.partition, started_at=from_ms(s.started_ms), last_seen_at=at,
        stalled_lso=s.stalled_lso, max_gap=s.max_gap, blocking_producer_id=s.blocking_producer_id,
        blocking_producer_epoch=s.blocking_producer_epoch, blocking_transactional_id=s.blocking_transactional_id)
        for s in findings.lso_stalls},
        undecided={_stall_key(tp.topic, tp.partition) for tp, p in snapshot.partitions.items()
                   if p.last_stable_offset is None or p.high_watermark is None})
    inserts: list[tuple[Table, list[dict[str, Any]]]] = [(m.table(m.TransactionTransition), transitions), (m.table(m.VerificationSample), verification),
               (m.table(m.ConsumerLagSample), lags)]
    return inserts, [hanging, stalls]


def sync_episodes(session: Session, cluster_id: int, sync: EpisodeSync, at: datetime) -> None:
    model: Any = sync.model  # either episode model; both have the columns used here
    is_hanging = model is m.HangingEpisode
    end_column = "resolved_at" if is_hanging else "ended_at"
    open_rows = session.scalars(select(model).where(model.cluster_id == cluster_id,
                                                    getattr(model, end_column).is_(None))).all()
    by_key = {(r.incident_key if is_hanging else _stall_key(r.topic, r.partition)): r for r in open_rows}
    keep = {"first_seen_at", "started_at"}  # the episode began when it first began
    refreshed: list[dict[str, Any]] = []
    for key, row in sync.active.items():
        existing = by_key.get(key)
        if existing is None:
            session.add(model(cluster_id=cluster_id, **row))
            continue
        refreshed.append({"episode_id": existing.id, **{k: v for k, v in row.items() if k not in keep}})
    if refreshed:
        # One executemany on the table: an ORM UPDATE per episode also re-evaluated its criteria against every
        # loaded episode (synchronize_session), O(open episodes²): 1,000 open LSO stalls on an 80,000-partition
        # lab cost seconds of every poll's store write.
        table = m.table(model)
        columns = [c for c in refreshed[0] if c != "episode_id"]
        session.execute(update(table).where(table.c.id == bindparam("episode_id"))
                        .values({c: bindparam(c) for c in columns}), refreshed)
    for key, row in by_key.items():
        if key not in sync.active and key not in sync.undecided:
            session.execute(update(model).where(model.id == row.id).values({end_column: at, "last_seen_at": at})
                            .execution_options(synchronize_session=False))
