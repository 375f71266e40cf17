"""What a new leadership term of a cluster's detection continues from.

Detection keeps a few clocks between polls (when an LSO stalled, when a transaction
entered Prepare*).  They die with the process, but the incidents they time are in the
database, so the replica that polls next reads them back here instead of starting over.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from txnwatch.core.epoch import to_ms
from txnwatch.core.findings import LsoStall
from txnwatch.core.model import TopicPartition, TxnState
from txnwatch.detect.hanging import PrepareKey
from txnwatch.detect.verification import OpenKey
from txnwatch.store import models as m

PREPARE_STATES = [s.value for s in TxnState if s.is_prepare]


def open_stalls(session: Session, cluster_id: int, cluster: str) -> list[LsoStall]:
    rows = session.scalars(select(m.LsoStallEpisode).where(m.LsoStallEpisode.cluster_id == cluster_id,
                                                           m.LsoStallEpisode.ended_at.is_(None)))
    return [LsoStall(cluster, TopicPartition(r.topic, r.partition), started_ms=to_ms(r.started_at),
                     last_seen_ms=to_ms(r.last_seen_at), stalled_lso=r.stalled_lso, max_gap=r.max_gap,
                     gap=r.max_gap, blocking_producer_id=r.blocking_producer_id,
                     blocking_producer_epoch=r.blocking_producer_epoch,
                     blocking_transactional_id=r.blocking_transactional_id) for r in rows]


def prepare_since(session: Session, cluster_id: int) -> dict[str, tuple[PrepareKey, int]]:
    """Transactions last seen in Prepare*, with when they were first observed entering that state.

    An id whose entering transition is no longer kept (retention) is left out: its clock
    starts again, as it would have without this.
    """
    t, s = m.TransactionTransition, m.TransactionState
    entered = (select(func.max(t.at_ms)).where(t.cluster_id == s.cluster_id,
                                               m.id_prefix(t.transactional_id) == s.id_sort,
                                               t.transactional_id == s.transactional_id,
                                               t.source == m.POLL, t.to_state == s.state)
               .scalar_subquery())
    # Polling's own clocks: the ids' poll rows (the log's rows carry the tail's state, not the poll's).
    rows = session.execute(select(s, entered).where(
        s.cluster_id == cluster_id, s.source == m.POLL, s.state.in_(PREPARE_STATES), s.gone_at.is_(None)))
    since: dict[str, tuple[PrepareKey, int]] = {}
    for state, entered_at in rows:
        if entered_at is not None:
            started = to_ms(state.txn_started_at) if state.txn_started_at is not None else None
            key: PrepareKey = (TxnState(state.state), state.producer_id, state.producer_epoch, started)
            since[state.transactional_id] = (key, entered_at)
    return since


def unlisted_open(session: Session, cluster_id: int) -> dict[OpenKey, int]:
    """The open hanging episodes' transactions, none of them listed by its coordinator, each since the
    producer's last write on the partition (or since the episode began, if that is earlier)."""
    rows = session.scalars(select(m.HangingEpisode).where(m.HangingEpisode.cluster_id == cluster_id,
                                                          m.HangingEpisode.resolved_at.is_(None)))
    return {(TopicPartition(r.topic, r.partition), r.producer_id, r.txn_start_offset):
            min(to_ms(r.first_seen_at), to_ms(r.last_write_at or r.first_seen_at))
            for r in rows if r.txn_start_offset is not None}
