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

from txnwatch.core.epoch import to_ms
from txnwatch.store import models as m
from txnwatch.store import txnlog_models as t


@dataclass(frozen=True)
class _Rule:
    model: type[m.Base]
    column: InstrumentedAttribute[datetime] | InstrumentedAttribute[datetime | None] | InstrumentedAttribute[int]
    extra: tuple[ColumnElement[bool], ...] = ()
    #: The column holds epoch milliseconds (models.TransactionTransition), not a datetime.
    epoch_ms: bool = False
    #: Name in purge()'s answer, when the table has several rules.
    label: str | None = None


RULES: tuple[_Rule, ...] = (
    _Rule(m.Poll, m.Poll.started_at),
    # The one transition table, per source and kind: what polling inferred, and the log's anomalies.  The log's
    # plain transitions are not here: the archive export purges them once archived (archive.py), after
    # transaction_log.hot_transitions_minutes, and an anomaly must outlive them (it is their row's twin).
    _Rule(m.TransactionTransition, m.TransactionTransition.at_ms, (m.TransactionTransition.source == m.POLL,), epoch_ms=True,
          label="transitions:poll"),
    _Rule(m.TransactionTransition, m.TransactionTransition.at_ms, (m.TransactionTransition.source == m.TRANSACTION_LOG,
                                             m.TransactionTransition.anomaly.is_not(None)), epoch_ms=True,
          label="transitions:anomalies"),
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
    # The transaction-log tail's per-minute aggregates.
    _Rule(t.TxnLogAggregate, t.TxnLogAggregate.bucket_start),
)


def purge(sessions: sessionmaker[Session], now: datetime, days: float, batch: int = 5_000) -> dict[str, int]:
    """Delete rows older than ``days``; returns deleted row counts per table."""
    cutoff = now - timedelta(days=days)
    deleted: dict[str, int] = {}
    cutoff_ms = to_ms(cutoff)
    for rule in RULES:
        table = rule.label or rule.model.__tablename__
        older: ColumnElement[bool] = rule.column < (cutoff_ms if rule.epoch_ms else cutoff)
        pk = rule.model.__table__.c.id
        total = 0
        while True:
            with sessions.begin() as session:
                ids = select(pk).where(rule.column.is_not(None), older, *rule.extra).limit(batch)
                ids_list = [row[0] for row in session.execute(ids)]
                if not ids_list:
                    break
                session.execute(delete(rule.model).where(pk.in_(ids_list)))
                total += len(ids_list)
            if len(ids_list) < batch:
                break
        deleted[table] = total
    return deleted
