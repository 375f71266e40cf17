"""Read-only queries behind the REST API.

Everything the API shows comes from the database, not from process memory, so any
number of API replicas answer alike.  Each query is shaped for one of the indexes in
:mod:`txnwatch.store.models`; "latest" samples are the rows of a cluster's newest
``sampled_at`` (every poll writes all its samples with one timestamp), found by one
probe of the ``(cluster_id, sampled_at)`` index instead of a scan.  Pagination is
keyset (sort key, id): pages stay cheap and stable however deep a client walks.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Row,
    Select,
    Text,
    and_,
    case,
    cast,
    exists,
    false,
    func,
    literal,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.orm import InstrumentedAttribute, Session, aliased

from txnwatch.store import models as m

OPEN_STATES = m.OPEN_TXN_STATES
# Sort key of transactions without an age: sorts them as the youngest (txn_ids.age_key holds it).
NO_AGE = m.NO_AGE

Keyset = tuple[Any, ...]
#: A column as queries pass it: a mapped attribute or an expression.
Col = ColumnElement[Any] | InstrumentedAttribute[Any]


def _after(columns: Sequence[Col], after: Keyset | None, descending: bool) -> ColumnElement[bool]:
    """Rows strictly past ``after`` in (columns...) order; a row-value comparison both backends index."""
    if after is None:
        return true()
    left, right = tuple_(*columns), tuple_(*(_bind_like(c, v) for c, v in zip(columns, after, strict=False)))
    return left < right if descending else left > right


def _bind_like(column: Col, value: Any) -> ColumnElement[Any]:
    return literal(value, type_=column.type)


def _any_of(column: Col, values: Collection[Any]) -> ColumnElement[bool]:
    """``column IN values`` as equalities: an IN list is re-rendered on every execution, these stay in the
    compiled-statement cache (measurable on the hottest list queries)."""
    values = list(values)
    if not values:
        return false()
    return column == values[0] if len(values) == 1 else or_(*(column == v for v in values))


def _order(columns: Sequence[Col], descending: bool) -> list[ColumnElement[Any]]:
    return [c.desc() if descending else c.asc() for c in columns]


def _with_cluster_name(model: type[m.Base]) -> Select[Any]:
    """All columns of ``model`` plus ``cluster_name``, as Core rows: lists skip ORM instance overhead."""
    table = model.__table__
    return select(*table.c, m.Cluster.name.label("cluster_name")).join(m.Cluster, m.Cluster.id == table.c.cluster_id)


def _bytewise(session: Session, column: Col) -> Col:
    """Order names by their bytes on PostgreSQL as SQLite does: the same order on both backends, whatever
    the database's locale, and no locale-aware comparisons in sorts and cursors."""
    return column.collate("C") if _dialect(session) == "postgresql" else column


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


# --- clusters ------------------------------------------------------------------------------------------


def cluster_ids(session: Session, names: Iterable[str] | None = None) -> dict[str, int]:
    stmt = select(m.Cluster.name, m.Cluster.id)
    if names is not None:
        stmt = stmt.where(m.Cluster.name.in_(list(names)))
    return {row.name: row.id for row in session.execute(stmt)}


def cluster_records(session: Session, names: Iterable[str] | None = None) -> dict[str, m.Cluster]:
    stmt = select(m.Cluster)
    if names is not None:
        stmt = stmt.where(m.Cluster.name.in_(list(names)))
    return {c.name: c for c in session.scalars(stmt)}


@dataclass(frozen=True)
class PollCounts:
    total: int = 0
    failed: int = 0


def poll_counts(session: Session, cluster_id: int | None = None) -> dict[int, PollCounts]:
    stmt = (select(m.Poll.cluster_id, func.count(), func.sum(case((m.Poll.ok.is_(False), 1), else_=0)))
            .group_by(m.Poll.cluster_id))
    if cluster_id is not None:
        stmt = stmt.where(m.Poll.cluster_id == cluster_id)
    return {cid: PollCounts(int(total), int(failed or 0)) for cid, total, failed in session.execute(stmt)}


@dataclass(frozen=True)
class ClusterActivity:
    open_transactions: int
    hanging_open: int
    lso_stalls_open: int
    alerts_firing: int


def cluster_activity(session: Session, cluster_id: int) -> ClusterActivity:
    def count(stmt: Select[Any]) -> int:
        return int(session.scalar(stmt) or 0)

    T, H, S, A = m.TransactionState, m.HangingEpisode, m.LsoStallEpisode, m.Alert
    return ClusterActivity(
        open_transactions=count(select(func.count()).select_from(T).where(
            T.cluster_id == cluster_id, _any_of(T.state, OPEN_STATES), T.gone_at.is_(None), shown())),
        hanging_open=count(select(func.count()).select_from(H).where(H.cluster_id == cluster_id,
                                                                     H.resolved_at.is_(None))),
        lso_stalls_open=count(select(func.count()).select_from(S).where(S.cluster_id == cluster_id,
                                                                        S.ended_at.is_(None))),
        alerts_firing=count(select(func.count()).select_from(A).where(A.state == "firing",
                                                                      A.cluster_id == cluster_id)),
    )


# --- transactions -------------------------------------------------------------------------------------


class TxnSort(StrEnum):
    AGE = "age"
    TRANSACTIONAL_ID = "transactional_id"
    STATE = "state"


@dataclass(frozen=True)
class TxnFilter:
    clusters: tuple[str, ...] = ()
    states: tuple[str, ...] = ()
    min_age_seconds: float | None = None
    id_prefix: str | None = None
    topic: str | None = None
    hanging: bool | None = None
    include_gone: bool = False


@dataclass(frozen=True)
class TxnRow:
    """``txn`` carries the id's columns (:func:`_txn_select`, the one view of an id) as attributes: a Core row,
    since ORM instances cost several times more CPU per row on the hottest list."""

    txn: Row[Any]
    cluster: str
    hanging: bool

    def age_seconds(self, now: datetime) -> float | None:
        started = _open_start(self.txn)
        return None if started is None else max(0.0, (now - started).total_seconds())


def _open_start(txn: Row[Any] | m.TransactionState) -> datetime | None:
    return txn.txn_started_at if txn.state in OPEN_STATES else None


_T = m.TransactionState
#: The poll row of the same id, beside a log row: what polling fills in.
_P = aliased(m.TransactionState, name="polled")
_L = aliased(m.TransactionState, name="logged")


def shown() -> ColumnElement[bool]:
    """The one row of each id that every reader shows (list, detail, console, cluster counts).

    The transaction log's row wins: the coordinators write every transition there, a poll only samples
    (Burrow's model: one table, the source a field).  It stops winning once polling has taken over
    (``superseded``: the cluster was polled while its tail was not exact) and a poll row exists, until the tail
    writes it again.  A poll row shows when no winning log row exists.
    """
    # The other source's row of the same id, by one probe of the unique key per row (null when there is none):
    # a scalar subquery, since PostgreSQL turns a NOT EXISTS here into a hash of every log row of the table.
    other_superseded = (select(_L.superseded).where(_L.cluster_id == _T.cluster_id, _L.id_hash == _T.id_hash,
                                                    _L.source != _T.source).limit(1).scalar_subquery())
    return or_(and_(_T.source == m.TRANSACTION_LOG, or_(_T.superseded.is_(False), other_superseded.is_(None))),
               and_(_T.source == m.POLL, func.coalesce(other_superseded, true()).is_(True)))


def _txn_key_column(sort: TxnSort) -> Col:
    keys: dict[TxnSort, Col] = {TxnSort.AGE: _T.age_key, TxnSort.TRANSACTIONAL_ID: _T.id_sort,
                                 TxnSort.STATE: _T.state}
    return keys[sort]


def txn_sort_key(txn: Row[Any] | m.TransactionState, sort: TxnSort) -> Keyset:
    """The keyset of a row, for the cursor of the page it ends.  Ids sort by their indexed head (the first
    ``ID_INDEX_CHARS`` characters, as ``substr`` counts them), then by row id."""
    if sort is TxnSort.AGE:
        return (_open_start(txn) or NO_AGE, txn.id)
    if sort is TxnSort.TRANSACTIONAL_ID:
        return (txn.transactional_id[:m.ID_INDEX_CHARS], txn.id)
    return (getattr(txn, sort.value), txn.id)


def _hanging_exists() -> ColumnElement[bool]:
    H = m.HangingEpisode
    return exists().where(H.cluster_id == _T.cluster_id, H.transactional_id == _T.transactional_id,
                          H.resolved_at.is_(None))


def _topic_member(session: Session, topic: str) -> ColumnElement[bool]:
    """``partitions`` (a JSON list of "topic-partition") holds a partition of ``topic``.

    Topics may contain '-', so "a-1-0" is partition 0 of "a-1", never of "a": the rest
    after ``topic + "-"`` must be all digits.
    """
    quoted = f'"{topic}-'  # topic names need no JSON escaping: [A-Za-z0-9._-]
    if _dialect(session) == "postgresql":
        elements = func.json_array_elements_text(_T.partitions).table_valued("value").alias("tp")
        rest = func.substr(elements.c.value, len(topic) + 2)
        digits: ColumnElement[bool] = rest.regexp_match("^[0-9]+$")
        prefilter = func.strpos(cast(_T.partitions, Text), quoted) > 0
    else:
        elements = func.json_each(_T.partitions).table_valued("value").alias("tp")
        rest = func.substr(elements.c.value, len(topic) + 2)
        digits = and_(rest != "", rest.op("NOT GLOB")("*[^0-9]*"))
        prefilter = func.instr(_T.partitions, quoted) > 0
    # The substring test on the JSON text is cheap and spares most rows the JSON expansion.
    return and_(prefilter, exists(select(1).select_from(elements).where(
        func.substr(elements.c.value, 1, len(topic) + 1) == topic + "-", digits)))


def _txn_conditions(session: Session, f: TxnFilter, now: datetime) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [_any_of(m.Cluster.name, f.clusters), shown()]
    if not f.include_gone:
        where.append(_T.gone_at.is_(None))
    if f.states:
        where.append(_any_of(_T.state, f.states))
    if f.min_age_seconds is not None:
        # Open and started at least that long ago, as one range of the age index (others' key is NO_AGE).
        where.append(_T.age_key <= now - timedelta(seconds=f.min_age_seconds))
    if f.id_prefix:
        # substr, not LIKE: exact and case-sensitive on both backends, no wildcard escaping. The byte range
        # around it (on the id's indexed head) lets the (id_sort, id) index find the ids instead of testing
        # every row.
        where.append(func.substr(_T.transactional_id, 1, len(f.id_prefix)) == f.id_prefix)
        head = f.id_prefix[:m.ID_INDEX_CHARS]
        ids = _bytewise(session, _T.id_sort)
        where.append(ids >= head)
        if (upper := prefix_upper_bound(head)) is not None:
            where.append(ids < upper)
    if f.topic:
        where.append(_topic_member(session, f.topic))
    if f.hanging is not None:
        where.append(_hanging_exists() if f.hanging else ~_hanging_exists())
    return where


def prefix_upper_bound(prefix: str) -> str | None:
    """The smallest string above every string that starts with ``prefix``, in code point (= UTF-8 byte)
    order; None when there is none (the prefix is all U+10FFFF)."""
    chars = list(prefix)
    while chars:
        code = ord(chars.pop()) + 1
        if code == 0xD800:
            code = 0xE000  # surrogates are not characters: UTF-8 cannot carry them
        if code <= 0x10FFFF:
            return "".join(chars) + chr(code)
    return None


#: Columns only polling can say (ListTransactions' coordinator, when the id was listed): a log row shows its
#: id's poll row's values.
_FILLED_IN = ("coordinator_id", "first_seen_at", "last_seen_at")


def _txn_select() -> Select[Any]:
    """The one view of an id: its shown row (:func:`shown`), with what polling fills in."""
    table = _T.__table__.c
    # the list computes ages from the row itself; id_sort is the head of transactional_id
    columns = [c for c in table if c.name not in ("age_key", "id_sort", *_FILLED_IN)]
    filled = [func.coalesce(_P.coordinator_id, _T.coordinator_id).label("coordinator_id"),
              case((_P.first_seen_at < _T.first_seen_at, _P.first_seen_at), else_=_T.first_seen_at)
              .label("first_seen_at"),
              case((_P.last_seen_at > _T.last_seen_at, _P.last_seen_at), else_=_T.last_seen_at)
              .label("last_seen_at")]
    return (select(*columns, *filled, m.Cluster.name.label("cluster_name"), _hanging_exists().label("hanging"))
            .join(m.Cluster, m.Cluster.id == _T.cluster_id)
            .outerjoin(_P, and_(_T.source == m.TRANSACTION_LOG, _P.cluster_id == _T.cluster_id,
                                _P.id_hash == _T.id_hash, _P.source == m.POLL)))


def list_transactions(session: Session, f: TxnFilter, *, sort: TxnSort, descending: bool, after: Keyset | None,
                      limit: int, now: datetime) -> list[TxnRow]:
    key = _txn_key_column(sort)
    if sort is not TxnSort.AGE:
        key = _bytewise(session, key)
    # "Oldest first" is ascending start time.
    key_descending = not descending if sort is TxnSort.AGE else descending
    stmt = (_txn_select()
            .where(*_txn_conditions(session, f, now), _after((key, _T.id), after, key_descending))
            .order_by(*_order((key, _T.id), key_descending))
            .limit(limit))
    return [TxnRow(row, row.cluster_name, bool(row.hanging)) for row in session.execute(stmt)]


def get_transaction(session: Session, cluster_id: int, transactional_id: str) -> TxnRow | None:
    """The id as the list shows it (the same view, :func:`shown`)."""
    row = session.execute(_txn_select().where(_T.cluster_id == cluster_id, _T.id_hash == m.id_hash(transactional_id),
                                              _T.transactional_id == transactional_id, shown())).first()
    return None if row is None else TxnRow(row, row.cluster_name, bool(row.hanging))


def logged(session: Session, cluster_id: int, transactional_id: str) -> m.TransactionState | None:
    """The id's transaction-log row (its own counts and log position), if the log ever spoke of it."""
    return session.scalar(select(_T).where(_T.cluster_id == cluster_id, _T.id_hash == m.id_hash(transactional_id),
                                           _T.source == m.TRANSACTION_LOG,
                                           _T.transactional_id == transactional_id))


def transitions(session: Session, cluster_id: int, transactional_id: str, limit: int) -> list[m.TransactionTransition]:
    """The id's transitions, every source, anomalies left out (each is also its transition): newest first,
    along the (cluster_id, head of transactional_id, at_ms) index."""
    X = m.TransactionTransition
    return list(session.scalars(
        select(X).where(X.cluster_id == cluster_id, *m.same_id(X.transactional_id, transactional_id), X.anomaly.is_(None))
        .order_by(X.at_ms.desc(), X.id.desc()).limit(limit)))


def open_hanging_of(session: Session, cluster_id: int, transactional_id: str) -> list[m.HangingEpisode]:
    H = m.HangingEpisode
    return list(session.scalars(
        select(H).where(H.cluster_id == cluster_id, H.resolved_at.is_(None), H.transactional_id == transactional_id)
        .order_by(H.first_seen_at, H.id)))


# --- partitions ----------------------------------------------------------------------------------------


def latest_sampled_at(session: Session, model: type[m.PartitionOffsetSample] | type[m.ConsumerLagSample],
                      clusters: Collection[str]) -> dict[int, datetime]:
    """Newest sample time per cluster id: one index probe each (ORDER BY ... LIMIT 1 on the
    (cluster_id, sampled_at) index, which both backends turn into a probe), one round trip for all."""
    newest = (select(model.sampled_at).where(model.cluster_id == m.Cluster.id)
              .order_by(model.sampled_at.desc()).limit(1).scalar_subquery())
    rows = session.execute(select(m.Cluster.id, newest).where(_any_of(m.Cluster.name, clusters)))
    return {cid: at for cid, at in rows if at is not None}


def _latest_condition(model: type[m.PartitionOffsetSample] | type[m.ConsumerLagSample],
                      latest: dict[int, datetime]) -> ColumnElement[bool]:
    return or_(*(and_(model.cluster_id == cid, model.sampled_at == at) for cid, at in latest.items()))


def partition_samples(session: Session, cluster_id: int, topics: Iterable[str]) -> list[m.PartitionOffsetSample]:
    """The cluster's latest samples of the partitions of ``topics``."""
    P = m.PartitionOffsetSample
    wanted = sorted(set(topics))
    at = session.scalar(select(P.sampled_at).where(P.cluster_id == cluster_id)
                        .order_by(P.sampled_at.desc()).limit(1))
    if at is None or not wanted:
        return []
    return list(session.scalars(select(P).where(P.cluster_id == cluster_id, P.sampled_at == at,
                                                P.topic.in_(wanted))))


def list_partitions(session: Session, clusters: Collection[str], *, topic: str | None, after: Keyset | None,
                    limit: int) -> list[Row[Any]]:
    """Latest sample of each partition, in (cluster id, topic, partition) order; rows add ``cluster_name``."""
    P = m.PartitionOffsetSample
    latest = latest_sampled_at(session, P, clusters)
    if not latest:
        return []
    key = (P.cluster_id, _bytewise(session, P.topic), P.partition)
    stmt = (_with_cluster_name(P).where(_latest_condition(P, latest), _after(key, after, False))
            .order_by(*key).limit(limit))
    if topic is not None:
        stmt = stmt.where(P.topic == topic)
    return list(session.execute(stmt))


# --- consumer groups -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupSummaryRow:
    cluster_id: int
    cluster: str
    group_id: str
    sampled_at: datetime
    partitions: int
    lag_lso: int | None
    lag_hwm: int | None
    max_lag_seconds: float | None
    topics: tuple[str, ...] = ()
    #: Partitions whose time lag is unknown (an unreadable first unconsumed record); max_lag_seconds leaves them out.
    lag_seconds_unknown: int = 0


def list_groups(session: Session, clusters: Collection[str], *, after: Keyset | None, limit: int) -> list[GroupSummaryRow]:
    """Each group's lag in its cluster's latest lag sample, in (cluster id, group) order."""
    L = m.ConsumerLagSample
    latest = latest_sampled_at(session, L, clusters)
    if not latest:
        return []
    key = (L.cluster_id, _bytewise(session, L.group_id))
    stmt = (select(L.cluster_id, m.Cluster.name, L.group_id, func.max(L.sampled_at), func.count(),
                   func.sum(L.lag_lso), func.sum(L.lag_hwm), func.max(L.lag_seconds), func.count(L.lag_seconds_unknown))
            .join(m.Cluster, m.Cluster.id == L.cluster_id)
            .where(_latest_condition(L, latest), _after(key, after, False))
            .group_by(L.cluster_id, m.Cluster.name, L.group_id)
            .order_by(*key).limit(limit))
    groups = [GroupSummaryRow(cid, name, gid, at, int(n), _int(lso), _int(hwm), secs, lag_seconds_unknown=int(unknown))
              for cid, name, gid, at, n, lso, hwm, secs, unknown in session.execute(stmt)]
    if not groups:
        return groups
    topics: dict[tuple[int, str], set[str]] = {}
    for cid, gid, topic in session.execute(
            select(L.cluster_id, L.group_id, L.topic).distinct()
            .where(_latest_condition(L, latest), L.group_id.in_({g.group_id for g in groups}))):
        topics.setdefault((cid, gid), set()).add(topic)
    return [GroupSummaryRow(**{**g.__dict__, "topics": tuple(sorted(topics.get((g.cluster_id, g.group_id), ())))})
            for g in groups]


def group_partitions(session: Session, cluster_id: int, group_id: str) -> list[m.ConsumerLagSample]:
    """The group's own latest sample, so a group that stopped committing still shows where it stopped."""
    L = m.ConsumerLagSample
    # The lookup index holds the id's head (a whole 32,767-byte group id does not fit in an index entry).
    group = (L.cluster_id == cluster_id, *m.same_id(L.group_id, group_id))
    at = session.scalar(select(func.max(L.sampled_at)).where(*group))
    if at is None:
        return []
    return list(session.scalars(select(L).where(*group,
                                                L.sampled_at == at).order_by(L.topic, L.partition)))


def group_record_lags(session: Session, clusters: Collection[str]) -> dict[tuple[int, str], int | None]:
    """(cluster id, group) -> the group's stored record lag in its cluster's latest lag sample: the sum over its
    partitions when every one was counted (migration 0009), else None."""
    L = m.ConsumerLagSample
    latest = latest_sampled_at(session, L, clusters)
    if not latest:
        return {}
    stmt = (select(L.cluster_id, L.group_id, func.count(), func.count(L.lag_records), func.sum(L.lag_records))
            .where(_latest_condition(L, latest)).group_by(L.cluster_id, L.group_id))
    return {(cid, gid): _int(total) if n == counted else None for cid, gid, n, counted, total in session.execute(stmt)}


@dataclass(frozen=True)
class GroupLagPoint:
    """One lag sample of a group, summed over its partitions; ``lag_records`` only when every one was counted."""

    sampled_at: datetime
    lag_lso: int | None
    lag_hwm: int | None
    lag_records: int | None


def group_lag_history(session: Session, cluster_id: int, group_id: str, since: datetime) -> list[GroupLagPoint]:
    """The group's lag samples since ``since``, oldest first."""
    L = m.ConsumerLagSample
    group = (L.cluster_id == cluster_id, *m.same_id(L.group_id, group_id))
    stmt = (select(L.sampled_at, func.sum(L.lag_lso), func.sum(L.lag_hwm), func.sum(L.lag_records), func.count(),
                   func.count(L.lag_records))
            .where(*group, L.sampled_at >= since).group_by(L.sampled_at).order_by(L.sampled_at))
    return [GroupLagPoint(at, _int(lso), _int(hwm), _int(records) if n == counted else None)
            for at, lso, hwm, records, n, counted in session.execute(stmt)]


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


# --- episodes -------------------------------------------------------------------------------------------


def list_hanging(session: Session, *, clusters: Collection[str], include_resolved: bool, after: Keyset | None,
                 limit: int) -> list[Row[Any]]:
    """Newest episodes first; rows add ``cluster_name``."""
    H = m.HangingEpisode
    key = (H.first_seen_at, H.id)
    stmt = (_with_cluster_name(H).where(_any_of(m.Cluster.name, clusters), _after(key, after, True))
            .order_by(*_order(key, True)).limit(limit))
    if not include_resolved:
        stmt = stmt.where(H.resolved_at.is_(None))
    return list(session.execute(stmt))


def list_lso_stalls(session: Session, *, clusters: Collection[str], since: datetime, after: Keyset | None,
                    limit: int) -> list[Row[Any]]:
    """Open stalls and those that ended at or after ``since``; newest first; rows add ``cluster_name``."""
    S = m.LsoStallEpisode
    key = (S.started_at, S.id)
    stmt = (_with_cluster_name(S)
            .where(_any_of(m.Cluster.name, clusters), or_(S.ended_at.is_(None), S.ended_at >= since),
                   _after(key, after, True))
            .order_by(*_order(key, True)).limit(limit))
    return list(session.execute(stmt))


# --- verification --------------------------------------------------------------------------------------

PERCENTILES = (0.5, 0.95, 0.99)


@dataclass(frozen=True)
class VerificationAgg:
    samples: int
    timed: int
    failed: int
    max_ms: int | None
    percentiles: tuple[int | None, ...]  # in PERCENTILES order, nearest rank


def verification_stats(session: Session, cluster_id: int, start: datetime, end: datetime) -> VerificationAgg:
    """Samples with ``start < observed_at <= end``, on the (cluster_id, observed_at) index."""
    V = m.VerificationSample
    window = (V.cluster_id == cluster_id, V.observed_at > start, V.observed_at <= end)
    samples, timed, failed, max_ms = session.execute(
        select(func.count(), func.count(V.verification_ms), func.sum(case((V.failed.is_(True), 1), else_=0)),
               func.max(V.verification_ms)).where(*window)).one()
    percentiles: tuple[int | None, ...] = tuple(None for _ in PERCENTILES)
    if timed:
        if _dialect(session) == "postgresql":
            row = session.execute(select(*(func.percentile_disc(p).within_group(V.verification_ms)
                                           for p in PERCENTILES)).where(*window)).one()
            percentiles = tuple(_int(v) for v in row)
        else:
            # Nearest rank, as PostgreSQL's percentile_disc: the ceil(p·n)-th smallest value.
            percentiles = tuple(_int(session.scalar(
                select(V.verification_ms).where(*window, V.verification_ms.is_not(None))
                .order_by(V.verification_ms).offset(max(math.ceil(p * timed) - 1, 0)).limit(1)))
                for p in PERCENTILES)
    return VerificationAgg(int(samples), int(timed), int(failed or 0), _int(max_ms), percentiles)


# --- alerts --------------------------------------------------------------------------------------------


def list_alerts(session: Session, *, clusters: Collection[str], with_unscoped: bool, states: Sequence[str],
                after: Keyset | None, limit: int) -> list[Row[Any]]:
    """Newest first; ``with_unscoped`` adds alerts about no cluster in particular (e.g. the database)."""
    A = m.Alert
    key = (A.started_at, A.id)
    scoped = _any_of(m.Cluster.name, clusters)
    stmt = (select(*A.__table__.c, m.Cluster.name.label("cluster_name"))
            .outerjoin(m.Cluster, m.Cluster.id == A.cluster_id)
            .where(or_(scoped, A.cluster_id.is_(None)) if with_unscoped else scoped, _after(key, after, True))
            .order_by(*_order(key, True)).limit(limit))
    if states:
        stmt = stmt.where(_any_of(A.state, states))
    return list(session.execute(stmt))
