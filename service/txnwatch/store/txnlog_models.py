"""Tables the transaction-log tail owns: where it is in the log, and what it derived from it.

Written by one writer (the tail of each cluster), in one database transaction per
applied batch together with the positions, so a restart or a new leader resumes at
exactly the last committed position with exactly the counters and per-id state that
position implies: nothing lost, nothing counted twice.

The full transition stream is not kept here for long: it is staged in
``txn_transitions`` (rows with ``log_offset`` set), exported to the Parquet archive and
purged from the database once archived.  What operators query stays: each id's
current state (the ``transaction_log`` rows of ``txn_ids``, models.TransactionState), anomalies (``txnlog_anomalies``) and per-minute
aggregates (``txnlog_aggregates``).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, ForeignKey, Index, Integer, String, Text, UniqueConstraint, column
from sqlalchemy.orm import Mapped, mapped_column

from txnwatch.store.models import Base, Id, id_prefix


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


class TxnLogAnomaly(Base):
    """A fence, timeout abort, producer id change, expiry, illegal transition, unknown record,
    stuck Prepare* or over-long transaction, as the log showed it."""

    __tablename__ = "txnlog_anomalies"
    __table_args__ = (
        Index("ix_txnlog_anomalies_at", "cluster_id", "at"),
        Index("ix_txnlog_anomalies_txn", "cluster_id", id_prefix(column("transactional_id", Text)), "at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    transactional_id: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(String(32))
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    producer_id: Mapped[int]
    producer_epoch: Mapped[int] = mapped_column(Integer)
    prev_producer_id: Mapped[int | None]
    prev_producer_epoch: Mapped[int | None] = mapped_column(Integer)
    timeout_ms: Mapped[int]
    txn_started_at: Mapped[datetime | None]
    duration_ms: Mapped[int | None]
    log_partition: Mapped[int] = mapped_column(Integer)
    log_offset: Mapped[int]
    detail: Mapped[str | None] = mapped_column(Text)


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


class TxnLogStream(Base):
    """The full transition stream, staged: one row per applied record, exported to the Parquet archive
    (table ``txnlog``) and purged once archived and older than ``transaction_log.hot_transitions_minutes``.

    Plain columns only (epoch milliseconds, comma-joined lists): a busy cluster stages tens of
    thousands of rows a second, and these go to the driver without per-value conversions.
    """

    __tablename__ = "txnlog_stream"
    __table_args__ = (
        Index("ix_txnlog_stream_txn", "cluster_id", id_prefix(column("transactional_id", Text)), "at_ms"),
        Index("ix_txnlog_stream_staged", "staged_at_ms"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    log_partition: Mapped[int] = mapped_column(Integer)
    log_offset: Mapped[int]
    at_ms: Mapped[int]
    staged_at_ms: Mapped[int]
    transactional_id: Mapped[str] = mapped_column(Text)
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    producer_id: Mapped[int]
    producer_epoch: Mapped[int] = mapped_column(Integer)
    prev_producer_id: Mapped[int | None]
    prev_producer_epoch: Mapped[int | None] = mapped_column(Integer)
    timeout_ms: Mapped[int]
    start_ms: Mapped[int | None]
    partitions: Mapped[str] = mapped_column(Text, default="")
    events: Mapped[str] = mapped_column(Text, default="")
    duration_ms: Mapped[int | None]
    client_transaction_version: Mapped[int] = mapped_column(Integer, default=0)
    detail: Mapped[str | None] = mapped_column(Text)
