"""Tables the transaction-log tail owns: where it is in the log, and what it derived from it.

Written by one writer (the tail of each cluster), in one database transaction per
applied batch together with the positions, so a restart or a new leader resumes at
exactly the last committed position with exactly the counters and per-id state that
position implies: nothing lost, nothing counted twice.

What the log says of each id lives in the one-per-concept tables of models.py, with
``source = 'transaction_log'``: the id's current state (``txn_ids``, models.TransactionState)
and its transitions and anomalies (``transitions``, models.TransactionTransition).  Here: the
positions, the counters and the per-minute aggregates, which only the log has.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from txnwatch.store.models import Base, Id


def _cluster_fk() -> Mapped[int]:
    return mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))


class TxnLogPosition(Base):
    """Next offset to read per ``__transaction_state`` partition."""

    __tablename__ = "txnlog_positions"
    __table_args__ = (UniqueConstraint("cluster_id", "log_partition", name="uq_txnlog_positions_partition"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    log_partition: Mapped[int] = mapped_column(Integer)
    next_offset: Mapped[int]
    updated_at: Mapped[datetime]


class TxnLogCounter(Base):
    """Cumulative counters derived from the log (commit, abort, fenced, records, transition:<from>:<to>, ...)."""

    __tablename__ = "txnlog_counters"
    __table_args__ = (UniqueConstraint("cluster_id", "name", name="uq_txnlog_counters_name"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    name: Mapped[str] = mapped_column(String(96))
    value: Mapped[int]


class TxnLogAggregate(Base):
    """Per cluster and minute: what the log recorded (the dashboards' and reports' cheap source)."""

    __tablename__ = "txnlog_aggregates"
    __table_args__ = (UniqueConstraint("cluster_id", "bucket_start", name="uq_txnlog_aggregates_bucket"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    bucket_start: Mapped[datetime]
    commits: Mapped[int] = mapped_column(default=0)
    aborts: Mapped[int] = mapped_column(default=0)
    timeout_aborts: Mapped[int] = mapped_column(default=0)
    fences: Mapped[int] = mapped_column(default=0)
    epoch_bumps: Mapped[int] = mapped_column(default=0)
    producer_id_changes: Mapped[int] = mapped_column(default=0)
    expirations: Mapped[int] = mapped_column(default=0)
    illegal_transitions: Mapped[int] = mapped_column(default=0)
    duration_ms_sum: Mapped[int] = mapped_column(default=0)
    duration_count: Mapped[int] = mapped_column(default=0)
    duration_ms_max: Mapped[int] = mapped_column(default=0)
