"""Rollup tables: the pipeline's loader and the API's typed queries.

Loading replaces whole periods: every row whose ``period_start`` falls in the
run's window is deleted and the fresh rows inserted in one transaction.  That is
the upsert that also forgets rows which no longer exist (a prefix that went quiet,
late data that moved a top-N), and it needs no dialect-specific ON CONFLICT.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal, TypeVar

from sqlalchemy import delete, insert, select
from sqlalchemy.orm import Session

from txnwatch.store.rollup_models import LagRollup, Offender, TopicRollup, TransactionRollup

Period = Literal["hour", "day"]
R = TypeVar("R", TransactionRollup, TopicRollup, LagRollup, Offender)

MODELS: dict[str, type[TransactionRollup | TopicRollup | LagRollup | Offender]] = {
    "transactions": TransactionRollup, "topics": TopicRollup, "lag": LagRollup, "offenders": Offender}
_BATCH = 2_000


def _aware(value: Any) -> Any:
    return value.replace(tzinfo=timezone.utc) if isinstance(value, datetime) and value.tzinfo is None else value


def replace_window(session: Session, since: datetime, until: datetime,
                   rows: Mapping[str, Iterable[Mapping[str, Any]]],
                   computed_at: datetime | None = None) -> dict[str, int]:
    """Replace every rollup with ``since <= period_start < until`` by ``rows`` (per table name).

    The caller commits; a failure leaves the previous rollups untouched.
    """
    stamp = computed_at or datetime.now(timezone.utc)
    loaded: dict[str, int] = {}
    for name, model in MODELS.items():
        session.execute(delete(model).where(model.period_start >= since, model.period_start < until))
        columns = set(model.__table__.columns.keys()) - {"id"}
        batch: list[dict[str, Any]] = []
        count = 0
        for row in rows.get(name, ()):
            record = {k: _aware(v) for k, v in row.items() if k in columns}
            record["period"] = row.get("period", "day")
            record["computed_at"] = stamp
            batch.append(record)
            if len(batch) >= _BATCH:
                session.execute(insert(model), batch)
                count += len(batch)
                batch = []
        if batch:
            session.execute(insert(model), batch)
            count += len(batch)
        loaded[name] = count
    return loaded


def _window(model: type[R], cluster: str, since: datetime, until: datetime, period: Period) -> Any:
    return select(model).where(model.cluster == cluster, model.period == period,
                               model.period_start >= since, model.period_start < until)


def transaction_rollups(session: Session, cluster: str, since: datetime, until: datetime,
                        period: Period = "day", txn_prefix: str | None = None,
                        topic: str | None = "*") -> Sequence[TransactionRollup]:
    """Transaction counts, duration percentiles and outcome rates; ``topic=None`` returns every topic row."""
    query = _window(TransactionRollup, cluster, since, until, period)
    if txn_prefix is not None:
        query = query.where(TransactionRollup.txn_prefix == txn_prefix)
    if topic is not None:
        query = query.where(TransactionRollup.topic == topic)
    return session.scalars(query.order_by(TransactionRollup.period_start, TransactionRollup.txn_prefix,
                                          TransactionRollup.topic)).all()


def daily_rollups(session: Session, cluster: str, since: datetime, until: datetime) -> Sequence[TransactionRollup]:
    """One row per day and prefix, all topics together: the report's headline table."""
    return transaction_rollups(session, cluster, since, until, "day")


def topic_rollups(session: Session, cluster: str, since: datetime, until: datetime,
                  period: Period = "day", topic: str | None = None) -> Sequence[TopicRollup]:
    """LSO stall minutes, max HWM−LSO, hanging counts and verification health per topic."""
    query = _window(TopicRollup, cluster, since, until, period)
    if topic is not None:
        query = query.where(TopicRollup.topic == topic)
    return session.scalars(query.order_by(TopicRollup.period_start, TopicRollup.topic)).all()


def lag_rollups(session: Session, cluster: str, since: datetime, until: datetime,
                period: Period = "day", group_id: str | None = None) -> Sequence[LagRollup]:
    """read_committed lag (against the LSO) percentiles per consumer group and topic."""
    query = _window(LagRollup, cluster, since, until, period)
    if group_id is not None:
        query = query.where(LagRollup.group_id == group_id)
    return session.scalars(query.order_by(LagRollup.period_start, LagRollup.group_id, LagRollup.topic)).all()


def top_offenders(session: Session, cluster: str, since: datetime, until: datetime,
                  kind: str | None = None, limit: int = 10) -> Sequence[Offender]:
    """Top subjects per day and kind (txn_max_duration_ms, txn_aborts, txn_fences, lso_stall_minutes,
    hanging_txns, verification_failures, lag_lso_max), best rank first."""
    query = _window(Offender, cluster, since, until, "day").where(Offender.rank <= limit)
    if kind is not None:
        query = query.where(Offender.kind == kind)
    return session.scalars(query.order_by(Offender.period_start, Offender.kind, Offender.rank)).all()


def rollup_clusters(session: Session) -> list[str]:
    """Clusters that have any rollups (the report index)."""
    return list(session.scalars(select(TransactionRollup.cluster).distinct().order_by(TransactionRollup.cluster)))
