"""Rollup tables: what the pipeline computed, for the API's reports and the dashboards.

Rows are keyed by cluster *name*, not id: the archive is, and rollups outlive the
cluster rows they came from (retention, a renamed deployment).  ``period`` is
``hour`` or ``day``; ``period_start`` the UTC start of that period.  Each run
replaces the periods it covered, so a rollup is always a function of the archive.

Tenant strings (transactional-id prefixes, group ids, offender subjects) are TEXT: Kafka allows ids of
32,767 bytes and a bounded column made the whole rollup write fail on PostgreSQL (issue 23).  Unique keys
hold their hex MD5 (``*_hash``, filled by the model when the writer leaves it out), since a btree entry
holds ~2.7 KB.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from txnwatch.store.models import Base, Id, id_hash


def _hash_of(column: str) -> Any:
    """A column default: the hash of the row's ``column`` (the pipeline's rows do not carry it)."""
    def default(context: Any) -> str:
        return id_hash(context.get_current_parameters()[column])
    return default


class _Rollup:
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    cluster: Mapped[str] = mapped_column(String(63))
    period: Mapped[str] = mapped_column(String(8))
    period_start: Mapped[datetime]
    computed_at: Mapped[datetime]


class TransactionRollup(_Rollup, Base):
    """Per transactional-id prefix and topic; topic '*' is the prefix over all its topics."""

    __tablename__ = "rollup_transactions"
    __table_args__ = (UniqueConstraint("cluster", "period", "period_start", "txn_prefix_hash", "topic",
                                       name="uq_rollup_transactions_key"),
                      Index("ix_rollup_transactions_window", "period_start"))

    txn_prefix: Mapped[str] = mapped_column(Text)
    txn_prefix_hash: Mapped[str] = mapped_column(String(32), default=_hash_of("txn_prefix"))
    topic: Mapped[str] = mapped_column(String(249))
    txn_count: Mapped[int]
    commits: Mapped[int]
    aborts: Mapped[int]
    timeout_aborts: Mapped[int]
    fences: Mapped[int]
    duration_ms_p50: Mapped[float | None] = mapped_column(Float)
    duration_ms_p95: Mapped[float | None] = mapped_column(Float)
    duration_ms_p99: Mapped[float | None] = mapped_column(Float)
    commit_rate: Mapped[float | None] = mapped_column(Float)
    abort_rate: Mapped[float | None] = mapped_column(Float)
    timeout_abort_rate: Mapped[float | None] = mapped_column(Float)
    fence_rate: Mapped[float | None] = mapped_column(Float)


class TopicRollup(_Rollup, Base):
    __tablename__ = "rollup_topics"
    __table_args__ = (UniqueConstraint("cluster", "period", "period_start", "topic", name="uq_rollup_topics_key"),
                      Index("ix_rollup_topics_window", "period_start"))

    topic: Mapped[str] = mapped_column(String(249))
    offset_samples: Mapped[int]
    max_hwm_lso_gap: Mapped[int | None]
    lso_stalls: Mapped[int]
    lso_stall_minutes: Mapped[float] = mapped_column(Float)
    hanging_txns: Mapped[int]
    verification_samples: Mapped[int]
    verification_failures: Mapped[int]
    verification_failure_rate: Mapped[float | None] = mapped_column(Float)
    verification_ms_p50: Mapped[float | None] = mapped_column(Float)
    verification_ms_p95: Mapped[float | None] = mapped_column(Float)
    verification_ms_p99: Mapped[float | None] = mapped_column(Float)


class LagRollup(_Rollup, Base):
    __tablename__ = "rollup_lag"
    __table_args__ = (UniqueConstraint("cluster", "period", "period_start", "group_id_hash", "topic",
                                       name="uq_rollup_lag_key"),
                      Index("ix_rollup_lag_window", "period_start"))

    group_id: Mapped[str] = mapped_column(Text)
    group_id_hash: Mapped[str] = mapped_column(String(32), default=_hash_of("group_id"))
    topic: Mapped[str] = mapped_column(String(249))
    samples: Mapped[int]
    lag_lso_p50: Mapped[float | None] = mapped_column(Float)
    lag_lso_p95: Mapped[float | None] = mapped_column(Float)
    lag_lso_p99: Mapped[float | None] = mapped_column(Float)
    lag_lso_max: Mapped[int | None]
    lag_hwm_p95: Mapped[float | None] = mapped_column(Float)


class Offender(_Rollup, Base):
    """Top-N subjects per cluster, day and kind (period is always 'day')."""

    __tablename__ = "rollup_offenders"
    __table_args__ = (UniqueConstraint("cluster", "period", "period_start", "kind", "rank",
                                       name="uq_rollup_offenders_key"),
                      Index("ix_rollup_offenders_window", "period_start"))

    kind: Mapped[str] = mapped_column(String(32))
    rank: Mapped[int] = mapped_column(Integer)
    subject: Mapped[str] = mapped_column(Text)
    value: Mapped[float] = mapped_column(Float)
