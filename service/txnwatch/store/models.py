"""SQLAlchemy 2 models: the history of what txnwatch saw, and the state it must not lose.

Times are timezone-aware UTC datetimes (``UtcDateTime``) so SQL users get real
timestamps on PostgreSQL and SQLite alike.  Offsets and producer ids are 64-bit.
Indexes follow the API's queries: "latest per cluster/partition", "open episodes",
"history of one transactional id".
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
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
    FunctionElement,
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
    func,
    literal,
    literal_column,
    or_,
    text,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from txnwatch.core.model import TxnState
from txnwatch.core.vocabulary import TransitionSource
from txnwatch.store.partial_index import PartialIndex

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


#: States in which a transaction is open (txnwatch.core.model.TxnState.is_open), as txn_ids.state stores them.
OPEN_TXN_STATES: tuple[str, ...] = tuple(s.value for s in TxnState if s.is_open)
#: Age sort key of transactions that are not open: after every open one.
NO_AGE = datetime(9999, 12, 31, tzinfo=timezone.utc)

#: ``source`` of an id's state and transitions as the column holds it (core.vocabulary.TransitionSource's words).
TRANSACTION_LOG, POLL = TransitionSource.TRANSACTION_LOG.value, TransitionSource.POLL.value
#: Leading characters of a tenant's id that indexes hold.  Kafka allows ids of 32,767 bytes; a PostgreSQL btree
#: entry holds ~2.7 KB, so an index on the whole id fails its INSERT (issue 23).  200 characters are at most
#: 800 bytes of UTF-8, and no real id prefix query is longer.
ID_INDEX_CHARS = 200


def id_hash(transactional_id: str) -> str:
    """The bounded key of a tenant's id (hex MD5 of its UTF-8, as PostgreSQL's ``md5()`` computes it): unique
    constraints and upserts use it, since the id itself may be too long for an index entry."""
    return hashlib.md5(transactional_id.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def _id_hash_default(context: Any) -> str:
    """id_hash of the row being inserted when its writer left it out (the hot writers set it themselves)."""
    return id_hash(context.get_current_parameters()["transactional_id"])


#: substr's bounds as SQL literals, not bound parameters: SQLite uses an expression index only for the same
#: expression, and ``substr(transactional_id, ?, ?)`` is not ``substr(transactional_id, 1, 200)``.  Bound, the
#: per-id history read every transition of the cluster and sorted them (issue 25).
_ID_PREFIX_BOUNDS: tuple[ColumnElement[int], ...] = (literal_column("1"), literal_column(str(ID_INDEX_CHARS)))


def id_prefix(value: Any) -> ColumnElement[str]:
    """The indexed head of an id column (or of a literal): the same expression, with the same literal bounds, in the
    index and the query."""
    return func.substr(value, *_ID_PREFIX_BOUNDS)


class _Unpropagated(FunctionElement[str]):
    """A column compared as a value: ``+column`` on SQLite, the column elsewhere.  From ``id = ?`` SQLite propagates
    the constant into the other terms (``substr(?, 1, 200) = ?``), and the id-prefix index then serves no term but
    the cluster's; the unary plus keeps its plan on the prefix (PostgreSQL has no unary plus for text, nor the
    rewrite)."""

    name = "unpropagated"
    type = Text()
    inherit_cache = True


@compiles(_Unpropagated)
def _column_itself(element: _Unpropagated, compiler: Any, **kw: Any) -> str:
    return str(compiler.process(element.clauses, **kw))


@compiles(_Unpropagated, "sqlite")
def _unary_plus(element: _Unpropagated, compiler: Any, **kw: Any) -> str:
    return "+" + str(compiler.process(element.clauses, **kw))


def same_id(column_: Any, value: str) -> tuple[ColumnElement[bool], ColumnElement[bool]]:
    """The rows of exactly this id, found along an (.., id_prefix(column), ..) index: its head there, then the whole
    id among those rows."""
    return id_prefix(column_) == value[:ID_INDEX_CHARS], _Unpropagated(column_) == value


def _age_key_expression() -> ColumnElement[datetime]:
    """When the open transaction started; NO_AGE for the others (and for an open one without a start time)."""
    state, started = column("state", String(32)), column("txn_started_at", UtcDateTime())
    is_open = or_(*(state == literal_column(f"'{s}'") for s in OPEN_TXN_STATES))
    return case((and_(is_open, started.is_not(None)), started), else_=literal(NO_AGE, UtcDateTime()))


class TransactionState(Base):
    """Each transactional id's current state, one row per (id, source): Burrow's model, the source is a field.

    ``source = 'transaction_log'`` rows are written by the transaction-log tail (exact: every transition, with
    the log position and the id's own counts, and what the tail resumes from); ``source = 'poll'`` rows by the
    recorder from each poll's ListTransactions/DescribeTransactions.  Readers see one row per id
    (``queries.shown``): the log's row wins unless polling has taken over since (``superseded``: set on every
    log row of a cluster polled while its tail is not exact, cleared when the tail writes the row again);
    polling fills in what the log cannot say (the coordinator, when the id was listed, whether it still is).
    """

    __tablename__ = "txn_ids"
    __table_args__ = (
        UniqueConstraint("cluster_id", "id_hash", "source", name="uq_txn_ids_key"),
        Index("ix_txn_ids_cluster_state", "cluster_id", "source", "state"),
        Index("ix_txn_ids_age", "age_key", "id"),
        # On PostgreSQL the migration makes it (id_sort COLLATE "C", id): the list's bytewise order.
        Index("ix_txn_ids_sort", "id_sort", "id"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    source: Mapped[str] = mapped_column(String(16), default=POLL)
    transactional_id: Mapped[str] = mapped_column(Text)
    id_hash: Mapped[str] = mapped_column(String(32), default=_id_hash_default)
    # The id's indexed head: the list's transactional_id order and id-prefix filter use it.
    id_sort: Mapped[str] = mapped_column(Text, Computed(id_prefix(column("transactional_id", Text)),
                                                          persisted=True))
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
    superseded: Mapped[bool] = mapped_column(Boolean, default=False)
    # The transaction log's own columns (log rows; null or 0 on poll rows).
    last_update_at: Mapped[datetime | None]
    client_transaction_version: Mapped[int] = mapped_column(Integer, default=0)
    client_tv: Mapped[int | None] = mapped_column(Integer)
    abort_origin: Mapped[str | None] = mapped_column(String(16))
    log_partition: Mapped[int | None] = mapped_column(Integer)
    log_offset: Mapped[int | None]
    commits: Mapped[int] = mapped_column(default=0)
    aborts: Mapped[int] = mapped_column(default=0)
    epoch_bumps: Mapped[int] = mapped_column(default=0)
    fences: Mapped[int] = mapped_column(default=0)
    timeout_aborts: Mapped[int] = mapped_column(default=0)
    # The default order of the transaction list (oldest open first) as a column the database computes, so no
    # writer can forget it, and an index can serve the sort: ordering by the CASE expression sorted every row
    # of the table on each page (issue 18 item 5: most of PostgreSQL's CPU per list request).
    age_key: Mapped[datetime] = mapped_column(Computed(_age_key_expression(), persisted=True))


#: The transition rows retention.days deletes (the stream's go with the archive export instead).
_KEPT_BY_RETENTION = "source = 'poll' OR anomaly IS NOT NULL"


class TransactionTransition(Base):
    """One change of a transactional id (state, producer id, epoch, timeout, partitions), whichever source saw it.

    ``source = 'transaction_log'`` rows are the log tail's full stream (one per applied record, with its log
    position): staged here, exported to the Parquet archive and purged once archived and older than
    ``transaction_log.hot_transitions_minutes``.  ``source = 'poll'`` rows are what polling inferred between
    two polls (clusters not in exact mode); retention deletes them after ``retention.days``.  Rows with
    ``anomaly`` set are the log's anomalies (a fence, a timeout abort, a stuck Prepare*...), the transition
    that showed one, kept for ``retention.days`` and never archived: they are not part of the timeline, and
    their key is (``anomaly``, ``log_partition``, ``log_offset``), not the stream's (partition, offset).

    Plain columns only (epoch milliseconds, comma-joined lists: topic names and event names hold no comma):
    a busy cluster stages tens of thousands of rows a second by COPY, without per-value conversions.
    """

    __tablename__ = "transitions"
    __table_args__ = (
        Index("ix_transitions_txn", "cluster_id", id_prefix(column("transactional_id", Text)), "at_ms"),
        Index("ix_transitions_staged", "staged_at_ms"),
        # Partial: the stream's rows (the hot path's COPY) maintain the same three btrees as before 0009, not
        # these two, which only anomalies and polled rows enter (the anomaly list, and retention).
        PartialIndex("ix_transitions_anomaly", "cluster_id", "anomaly", "at_ms", where=text("anomaly IS NOT NULL")),
        PartialIndex("ix_transitions_retention", "source", "at_ms", where=text(_KEPT_BY_RETENTION)),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    source: Mapped[str] = mapped_column(String(16))
    anomaly: Mapped[str | None] = mapped_column(String(32))
    transactional_id: Mapped[str] = mapped_column(Text)
    #: When it happened: the record's timestamp (log) or the poll that saw it.
    at_ms: Mapped[int]
    #: When the row was written: the archive export waits until it has settled.
    staged_at_ms: Mapped[int]
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
    # The transaction log's own columns (null on poll rows).
    log_partition: Mapped[int | None] = mapped_column(Integer)
    log_offset: Mapped[int | None]
    client_transaction_version: Mapped[int | None] = mapped_column(Integer)
    detail: Mapped[str | None] = mapped_column(Text)


def joined(values: Iterable[str]) -> str:
    """A list as ``TransactionTransition`` stores it (comma-joined)."""
    return ",".join(values)


def split(value: str | None) -> list[str]:
    """A ``TransactionTransition`` list column back as a list."""
    return value.split(",") if value else []


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
    blocking_transactional_id: Mapped[str | None] = mapped_column(Text)


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
    transactional_id: Mapped[str | None] = mapped_column(Text)
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
    transactional_id: Mapped[str | None] = mapped_column(Text)
    observed_at: Mapped[datetime]
    verification_ms: Mapped[int | None]
    failed: Mapped[bool] = mapped_column(Boolean, default=False)


class ConsumerLagSample(Base):
    __tablename__ = "lag_samples"
    __table_args__ = (
        Index("ix_lag_samples_lookup", "cluster_id", id_prefix(column("group_id", Text)), "sampled_at"),
        Index("ix_lag_samples_latest", "cluster_id", "sampled_at"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster_id: Mapped[int] = _cluster_fk()
    group_id: Mapped[str] = mapped_column(Text)
    topic: Mapped[str] = mapped_column(String(249))
    partition: Mapped[int] = mapped_column(Integer)
    sampled_at: Mapped[datetime]
    committed_offset: Mapped[int]
    lag_hwm: Mapped[int | None]
    lag_lso: Mapped[int | None]
    lag_seconds: Mapped[float | None] = mapped_column(Float)
    #: Why lag_seconds is unknown: the first unconsumed record cannot be read (model.UnreadableRecord).
    lag_seconds_unknown: Mapped[str | None] = mapped_column(String(500))
    #: Records a read_committed consumer still reads up to the LSO (core.findings.GroupLag.lag_records); null when
    #: not counted at that poll, and on rows written before migration 0009.
    lag_records: Mapped[int | None]


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
    """Every admin action (e.g. aborting a hanging transaction), dry runs and refused attempts included.

    Written ahead (txnwatch.remedy.audit): the intent (``at``, ``actor``, ``client``, what) is committed before
    Kafka is asked anything, the outcome (``outcome``, ``finished_at``) after; a NULL outcome is an action whose
    outcome is unknown (the process or the database failed between the two)."""

    __tablename__ = "admin_audit"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    at: Mapped[datetime]
    actor: Mapped[str] = mapped_column(String(255))
    #: Where the request came from: the API's client (behind a trusted proxy, the X-Forwarded-For client), the
    #: CLI's user@host.
    client: Mapped[str | None] = mapped_column(String(255))
    action: Mapped[str] = mapped_column(String(64))
    cluster: Mapped[str] = mapped_column(String(63))
    target: Mapped[dict[str, Any]] = mapped_column(JSON)
    dry_run: Mapped[bool] = mapped_column(Boolean)
    outcome: Mapped[str | None] = mapped_column(Text)
    finished_at: Mapped[datetime | None]
