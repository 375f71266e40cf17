"""Deleting history past its retention, in small batches.

Batches keep each DELETE's lock short, so the collector's writes and the API's reads
never wait long behind a retention run on a big table.  Open episodes, unresolved
alerts and undelivered notifications are never deleted, however old.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, select
from sqlalchemy.orm import InstrumentedAttribute, Session, sessionmaker

from txnwatch.store import models as m
from txnwatch.store import txnlog_models as t


@dataclass(frozen=True)
class _Rule:
    model: type[m.Base]
    column: InstrumentedAttribute[datetime] | InstrumentedAttribute[datetime | None]
    extra: tuple[ColumnElement[bool], ...] = ()


RULES: tuple[_Rule, ...] = (
    _Rule(m.Poll, m.Poll.started_at),
    _Rule(m.TransactionTransition, m.TransactionTransition.observed_at),
    _Rule(m.PartitionOffsetSample, m.PartitionOffsetSample.sampled_at),
    _Rule(m.VerificationSample, m.VerificationSample.observed_at),
    _Rule(m.ConsumerLagSample, m.ConsumerLagSample.sampled_at),
    _Rule(m.LsoStallEpisode, m.LsoStallEpisode.ended_at),
    _Rule(m.HangingEpisode, m.HangingEpisode.resolved_at),
    _Rule(m.TransactionState, m.TransactionState.gone_at),
    _Rule(m.OutboxEvent, m.OutboxEvent.sent_at),
    _Rule(m.Alert, m.Alert.resolved_at,
          (~select(m.OutboxEvent.id).where(m.OutboxEvent.alert_id == m.Alert.id,
                                           m.OutboxEvent.status == "pending").exists(),)),
    _Rule(m.AdminAudit, m.AdminAudit.at),
    # The transaction-log tail's anomalies and per-minute aggregates (its stream has its own, shorter window).
    _Rule(t.TxnLogAnomaly, t.TxnLogAnomaly.at),
    _Rule(t.TxnLogAggregate, t.TxnLogAggregate.bucket_start),
)


def purge(sessions: sessionmaker[Session], now: datetime, days: float, batch: int = 5_000) -> dict[str, int]:
    """Delete rows older than ``days``; returns deleted row counts per table."""
    cutoff = now - timedelta(days=days)
    deleted: dict[str, int] = {}
    for rule in RULES:
        table = rule.model.__tablename__
        pk = rule.model.__table__.c.id
        total = 0
        while True:
            with sessions.begin() as session:
                ids = select(pk).where(rule.column.is_not(None), rule.column < cutoff, *rule.extra).limit(batch)
                ids_list = [row[0] for row in session.execute(ids)]
                if not ids_list:
                    break
                session.execute(delete(rule.model).where(pk.in_(ids_list)))
                total += len(ids_list)
            if len(ids_list) < batch:
                break
        deleted[table] = total
    return deleted
