"""SQLAlchemy 2 models: the history of what txnwatch saw, and the state it must not lose.

Times are timezone-aware UTC datetimes (``UtcDateTime``) so SQL users get real
timestamps on PostgreSQL and SQLite alike.  Offsets and producer ids are 64-bit.
Indexes follow the API's queries: "latest per cluster/partition", "open episodes",
"history of one transactional id".
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, ClassVar, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ColumnElement,
    Computed,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    case,
    column,
    literal,
    literal_column,
    or_,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from txnwatch.core.model import TxnState

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in, aware UTC datetimes out, on every backend (SQLite drops tzinfo)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UtcDateTime column")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)

    def result_processor(self, dialect: Any, coltype: Any) -> Any:
        """process_result_value in one call per value, skipping values already in UTC: an API page reads
        hundreds of timestamps, and TypeDecorator's generic wrapper cost two Python calls for each."""
        impl = self.impl_instance.result_processor(dialect, coltype)
        utc = timezone.utc

        def process(value: Any) -> datetime | None:
            if impl is not None:
                value = impl(value)
            if value is None:
                return None
            tz = value.tzinfo
            if tz is utc:
                return value
            return value.replace(tzinfo=utc) if tz is None else value.astimezone(utc)

        return process


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UtcDateTime(), int: BigInteger(), dict[str, Any]: JSON()}


def table(model: type[Base]) -> Table:
    """The Core table of a mapped class, typed as such (SQLAlchemy types ``__table__`` as a FromClause)."""
    return cast(Table, model.__table__)


Id = BigInteger().with_variant(Integer(), "sqlite")  # SQLite autoincrements INTEGER PRIMARY KEY only


def _cluster_fk() -> Mapped[int]:
    return mapped_column(ForeignKey("clusters.id", ondelete="CASCADE"))


class Cluster(Base):
    __tablename__ = "clusters"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    bootstrap_servers: Mapped[str] = mapped_column(Text)
    up: Mapped[bool] = mapped_column(Boolean, default=False)
    last_poll_at: Mapped[datetime | None]
    last_success_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime]


class Poll(Base):
    """One poll of one cluster: lets /readyz and the pipeline see gaps and slow polls."""

    __tablename__ = "polls"
    __table_args__ = (Index("ix_polls_cluster_started", "cluster_id", "started_at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    started_at: Mapped[datetime]
    duration_ms: Mapped[int]
    ok: Mapped[bool] = mapped_column(Boolean)
    error_count: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text)


#: States in which a transaction is open (txnwatch.core.model.TxnState.is_open), as txn_states.state stores them.
OPEN_TXN_STATES: tuple[str, ...] = tuple(s.value for s in TxnState if s.is_open)
#: Age sort key of transactions that are not open: after every open one.
NO_AGE = datetime(9999, 12, 31, tzinfo=timezone.utc)


def _age_key_expression() -> ColumnElement[datetime]:
    """When the open transaction started; NO_AGE for the others (and for an open one without a start time)."""
    state, started = column("state", String(32)), column("txn_started_at", UtcDateTime())
    is_open = or_(*(state == literal_column(f"'{s}'") for s in OPEN_TXN_STATES))
    return case((and_(is_open, started.is_not(None)), started), else_=literal(NO_AGE, UtcDateTime()))


class TransactionState(Base):
    """Latest coordinator view of each transactional id (one row per id, updated in place)."""

    __tablename__ = "txn_states"
    __table_args__ = (
        UniqueConstraint("cluster_id", "transactional_id", name="uq_txn_states_cluster_txn"),
        Index("ix_txn_states_cluster_state", "cluster_id", "state"),
        Index("ix_txn_states_age", "age_key", "id"),
        # On PostgreSQL the migration makes it (transactional_id COLLATE "C", id): the list's bytewise order.
        Index("ix_txn_states_txn_id", "transactional_id", "id"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    transactional_id: Mapped[str] = mapped_column(String(512))
    coordinator_id: Mapped[int | None] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(32))
    producer_id: Mapped[int]
    producer_epoch: Mapped[int] = mapped_column(Integer)
    timeout_ms: Mapped[int]
    txn_started_at: Mapped[datetime | None]
    partitions: Mapped[list[str]] = mapped_column(JSON, default=list)
    first_seen_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    gone_at: Mapped[datetime | None]
    # The default order of the transaction list (oldest open first) as a column the database computes, so no
    # writer can forget it, and an index can serve the sort: ordering by the CASE expression sorted every row
    # of the table on each page (issue 18 item 5: most of PostgreSQL's CPU per list request).
    age_key: Mapped[datetime] = mapped_column(Computed(_age_key_expression(), persisted=True))


class TransactionTransition(Base):
    """One observed change of a transactional id's (state, producer id, epoch, timeout, partitions)."""

    __tablename__ = "txn_transitions"
    __table_args__ = (
        Index("ix_txn_transitions_lookup", "cluster_id", "transactional_id", "observed_at"),
        Index("ix_txn_transitions_observed", "observed_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    transactional_id: Mapped[str] = mapped_column(String(512))
    observed_at: Mapped[datetime]
    from_state: Mapped[str | None] = mapped_column(String(32))
    to_state: Mapped[str] = mapped_column(String(32))
    producer_id: Mapped[int]
    producer_epoch: Mapped[int] = mapped_column(Integer)
    prev_producer_id: Mapped[int | None]
    prev_producer_epoch: Mapped[int | None] = mapped_column(Integer)
    timeout_ms: Mapped[int]
    txn_started_at: Mapped[datetime | None]
    partitions: Mapped[list[str]] = mapped_column(JSON, default=list)
    events: Mapped[list[str]] = mapped_column(JSON, default=list)
    duration_ms: Mapped[int | None]


class PartitionOffsetSample(Base):
    __tablename__ = "partition_offsets"
    __table_args__ = (
        Index("ix_partition_offsets_lookup", "cluster_id", "topic", "partition", "sampled_at"),
        Index("ix_partition_offsets_latest", "cluster_id", "sampled_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    topic: Mapped[str] = mapped_column(String(249))
    partition: Mapped[int] = mapped_column(Integer)
    sampled_at: Mapped[datetime]
    leader: Mapped[int | None] = mapped_column(Integer)
    high_watermark: Mapped[int | None]
    last_stable_offset: Mapped[int | None]
    log_start_offset: Mapped[int | None]
    open_transactions: Mapped[int] = mapped_column(Integer, default=0)


class LsoStallEpisode(Base):
    __tablename__ = "lso_stalls"
    __table_args__ = (
        UniqueConstraint("cluster_id", "topic", "partition", "started_at", name="uq_lso_stalls_episode"),
        Index("ix_lso_stalls_open", "cluster_id", "ended_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    topic: Mapped[str] = mapped_column(String(249))
    partition: Mapped[int] = mapped_column(Integer)
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
    last_seen_at: Mapped[datetime]
    stalled_lso: Mapped[int]
    max_gap: Mapped[int] = mapped_column(default=0)
    blocking_producer_id: Mapped[int | None]
    blocking_producer_epoch: Mapped[int | None] = mapped_column(Integer)
    blocking_transactional_id: Mapped[str | None] = mapped_column(String(512))


class HangingEpisode(Base):
    __tablename__ = "hanging_txns"
    __table_args__ = (
        UniqueConstraint("cluster_id", "incident_key", "first_seen_at", name="uq_hanging_txns_episode"),
        Index("ix_hanging_txns_open", "cluster_id", "resolved_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    incident_key: Mapped[str] = mapped_column(String(700))
    topic: Mapped[str] = mapped_column(String(249))
    partition: Mapped[int] = mapped_column(Integer)
    producer_id: Mapped[int]
    producer_epoch: Mapped[int] = mapped_column(Integer)
    transactional_id: Mapped[str | None] = mapped_column(String(512))
    coordinator_id: Mapped[int | None] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(String(64))
    txn_start_offset: Mapped[int | None]
    last_write_at: Mapped[datetime | None]
    first_seen_at: Mapped[datetime]
    last_seen_at: Mapped[datetime]
    resolved_at: Mapped[datetime | None]


class VerificationSample(Base):
    __tablename__ = "verification_samples"
    __table_args__ = (Index("ix_verification_samples_lookup", "cluster_id", "observed_at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    topic: Mapped[str] = mapped_column(String(249))
    partition: Mapped[int] = mapped_column(Integer)
    producer_id: Mapped[int]
    transactional_id: Mapped[str | None] = mapped_column(String(512))
    observed_at: Mapped[datetime]
    verification_ms: Mapped[int | None]
    failed: Mapped[bool] = mapped_column(Boolean, default=False)


class ConsumerLagSample(Base):
    __tablename__ = "lag_samples"
    __table_args__ = (
        Index("ix_lag_samples_lookup", "cluster_id", "group_id", "sampled_at"),
        Index("ix_lag_samples_latest", "cluster_id", "sampled_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    group_id: Mapped[str] = mapped_column(String(255))
    topic: Mapped[str] = mapped_column(String(249))
    partition: Mapped[int] = mapped_column(Integer)
    sampled_at: Mapped[datetime]
    committed_offset: Mapped[int]
    lag_hwm: Mapped[int | None]
    lag_lso: Mapped[int | None]
    lag_seconds: Mapped[float | None] = mapped_column(Float)
    #: Why lag_seconds is unknown: the first unconsumed record cannot be read (model.UnreadableRecord).
    lag_seconds_unknown: Mapped[str | None] = mapped_column(String(500))


class Alert(Base):
    """An alert instance: one incident of one rule, pending → firing → resolved."""

    __tablename__ = "alerts"
    __table_args__ = (
        Index("ix_alerts_active", "state", "rule"),
        Index("ix_alerts_incident", "incident_key", "started_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int | None] = mapped_column(ForeignKey("clusters.id", ondelete="SET NULL"))
    rule: Mapped[str] = mapped_column(String(64))
    incident_key: Mapped[str] = mapped_column(String(700))
    state: Mapped[str] = mapped_column(String(16))
    severity: Mapped[str] = mapped_column(String(16))
    summary: Mapped[str] = mapped_column(Text)
    labels: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    started_at: Mapped[datetime]
    fired_at: Mapped[datetime | None]
    resolved_at: Mapped[datetime | None]
    last_seen_at: Mapped[datetime]


class OutboxEvent(Base):
    """A notification waiting to be delivered; rows survive restarts so pages are neither lost nor repeated."""

    __tablename__ = "notification_outbox"
    __table_args__ = (Index("ix_notification_outbox_due", "status", "next_attempt_at"),)

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    alert_id: Mapped[int | None] = mapped_column(ForeignKey("alerts.id", ondelete="SET NULL"))
    channel: Mapped[str] = mapped_column(String(32))
    action: Mapped[str] = mapped_column(String(16))
    dedup_key: Mapped[str] = mapped_column(String(255))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    next_attempt_at: Mapped[datetime]
    sent_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(Text)


class AdminAudit(Base):
    """Every admin action (e.g. aborting a hanging transaction), dry runs included."""

    __tablename__ = "admin_audit"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    cluster: Mapped[str] = mapped_column(String(63))
    target: Mapped[dict[str, Any]] = mapped_column(JSON)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str] = mapped_column(Text)
