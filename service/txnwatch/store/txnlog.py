"""Storing what the transaction-log tail derived, together with where it got to, atomically.

:func:`write_batch` runs in ONE database transaction: the new log positions, the
counter increments, the changed per-id states, the transitions (staged for the
archive), the anomalies and the per-minute aggregates.  Either all of it commits or
none of it does, so :func:`load` after a crash, a restart or a leader change hands
back positions and a derived state that belong together: re-reading from there
neither skips a record nor counts one twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, delete, select
from sqlalchemy.orm import Session

from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.core.extras import say_uncompiled
from txnwatch.core.findings import Transition
from txnwatch.core.model import TxnState, split_topic_partition
from txnwatch.core.vocabulary import LONG_TRANSACTION, STUCK_PREPARE
from txnwatch.detect.txnlog import ANOMALIES, IdState, TxnLogFindings, TxnLogState
from txnwatch.store import models as m
from txnwatch.store import txnlog_models as t
from txnwatch.store.db import Target, connection_of
from txnwatch.store.isolation import Rejections
from txnwatch.store.statement_shapes import LARGEST_ROWS, chunk_sizes, insert_rows, rows_per_statement
from txnwatch.store.txnlog_progress import sqlite_time, write_progress

_UTC = UTC
log = logging.getLogger(__name__)

#: Why the compiled parameters of the stream's INSERTs are missing (the ImportError), None when they are there:
#: installed without a C compiler (setup.py), SQLite stages through :func:`stream_rows` as before, a little slower.
STREAM_PARAMS_MISSING: str | None = None
try:
    from txnwatch.store._stream_params import stream_params as _compiled_stream_params
except ImportError as exc:
    _compiled_stream_params = None  # type: ignore[assignment]  # the stub types the function, this is its absence
    STREAM_PARAMS_MISSING = str(exc)
#: ``_stream_params.stream_params`` (see :func:`_stage_sqlite`), None where txnwatch was installed without it.
STREAM_PARAMS: Callable[..., tuple[Any, ...]] | None = _compiled_stream_params


def _tp(partitions: Iterable[tuple[str, int]]) -> list[str]:
    return sorted(f"{topic}-{partition}" for topic, partition in partitions)


@dataclass(frozen=True)
class Resumed:
    """What a tail starts from: the committed positions and everything derived up to them."""

    positions: dict[int, int]
    state: TxnLogState
    counters: dict[str, int]


#: In Transition's field order after the three the tail adds, so a row is the transition's own slices (C-level
#: copies) around its two joined lists: :func:`stream_rows` runs once per record of the log.  Its last field,
#: ``source``, is the constant one (the stream is the log's).
STREAM_COLUMNS = ("cluster_id", "source", "staged_at_ms", "transactional_id", "at_ms", "log_partition", "log_offset",
                  "from_state", "to_state", "producer_id", "producer_epoch", "prev_producer_id", "prev_producer_epoch",
                  "timeout_ms", "start_ms", "partitions", "events", "duration_ms", "client_transaction_version",
                  "detail")
#: An anomaly is the transition that showed it, with its kind (models.TransactionTransition.anomaly).
ANOMALY_COLUMNS = (*STREAM_COLUMNS, "anomaly")
_LOG = m.TRANSACTION_LOG


#: An id's partitions as the row stores them, by the tuple: a producer writes to the same few partitions in every
#: transaction, and joining them was a third of building a row.  Cleared when it holds _JOINED_MAX tuples (tenants'
#: topics are unbounded); the tuples are mostly the live ids' own (IdState.partitions).
_joined_partitions: dict[tuple[tuple[str, int], ...], str] = {}
_JOINED_MAX = 4_096


def _partitions_text(partitions: tuple[tuple[str, int], ...]) -> str:
    if len(_joined_partitions) >= _JOINED_MAX:
        _joined_partitions.clear()
    text = _joined_partitions[partitions] = ",".join(f"{topic}-{p}" for topic, p in partitions)
    return text


def stream_rows(cluster_id: int, staged_at_ms: int, transitions: Iterable[Transition]) -> list[tuple[Any, ...]]:
    """Plain tuples in STREAM_COLUMNS order: the hot path, so no per-value type processing, and each row built from
    the transition's slices in one expression (tests/store/test_txnlog_insert_many.py pins Transition's field
    order against STREAM_COLUMNS)."""
    joined = _joined_partitions
    log = _LOG
    return [(cluster_id, log, staged_at_ms, *x[:12],
             text if (text := joined.get(x[12])) is not None else _partitions_text(x[12]), ",".join(x[13]),
             *x[14:17]) for x in transitions]


def stage_transitions_of(session: Target, cluster_id: int, staged_at_ms: int,
                         transitions: Sequence[Transition]) -> None:
    """The transitions as stream rows (STREAM_COLUMNS), inside the session's transaction: on SQLite with the
    compiled parameters (:func:`_stage_sqlite`), else :func:`stream_rows` through :func:`_stage`."""
    params = STREAM_PARAMS
    connection = connection_of(session)
    if params is not None and connection.dialect.name == "sqlite":
        _stage_sqlite(connection, cluster_id, staged_at_ms, transitions, params)
        return
    if connection.dialect.name == "sqlite":
        say_uncompiled(log, "the compiled stream-row builder", "storing the transaction log's stream rows in Python",
                       "about 1.2x the writer's CPU per record", STREAM_PARAMS_MISSING)
    _stage(connection, stream_rows(cluster_id, staged_at_ms, transitions))


#: The transition's own columns, in Transition's order (the stream row's after its three constant ones).
_STREAM_FIELDS = STREAM_COLUMNS[3:]
#: SQLite's multi-row INSERT of n stream rows, by n (a few powers of two: store/statement_shapes.py).
_STREAM_SQL: dict[int, str] = {}


def _stream_sql(rows: int) -> str:
    """``rows`` stream rows in one INSERT whose constants are bound once: ?1 the cluster, ?2 when staged (a ``?``
    after them takes the next number), the source a literal."""
    sql = _STREAM_SQL.get(rows)
    if sql is None:
        source = "'" + _LOG.replace("'", "''") + "'"
        one = f"(?1, {source}, ?2, {', '.join(['?'] * len(_STREAM_FIELDS))})"
        sql = _STREAM_SQL[rows] = (f"INSERT INTO {m.TransactionTransition.__tablename__} "
                                   f"({', '.join(STREAM_COLUMNS)}) VALUES " + ", ".join([one] * rows))
    return sql


def _stage_sqlite(connection: Connection, cluster_id: int, staged_at_ms: int, transitions: Sequence[Transition],
                  params: Callable[..., tuple[Any, ...]]) -> None:
    """The stream rows of ``transitions`` on SQLite, in order, in the multi-row INSERTs of :func:`_insert_many`,
    each statement's parameters built in one compiled pass (``_stream_params.c``): no row tuple, no flattening,
    and three values a row fewer to bind.  The rows are the ones :func:`stream_rows` gives, value for value
    (tests/store/test_stream_params.py)."""
    dbapi = connection.connection.driver_connection
    # Two values a row more than it takes, so the two bound once always fit (SQLite's variable limit).
    per = rows_per_statement(dbapi, len(_STREAM_FIELDS) + 2, _MAX_ROWS_PER_INSERT)
    head = (cluster_id, staged_at_ms)
    cursor = dbapi.cursor()  # type: ignore[union-attr]  # the sqlite3 connection under the session
    try:
        start = 0
        for size in chunk_sizes(len(transitions), per):
            cursor.execute(_stream_sql(size),
                           params(head, transitions, start, start + size, _joined_partitions, _partitions_text))
            start += size
    finally:
        cursor.close()


def _stage(session: Target, rows: list[tuple[Any, ...]]) -> None:
    """PostgreSQL: COPY, several times faster than INSERT for tens of thousands of rows; SQLite: multi-row
    INSERTs (_insert_many); elsewhere executemany.  All run inside the session's transaction."""
    connection = connection_of(session)
    if connection.dialect.name == "postgresql" and connection.dialect.driver == "psycopg":
        driver = connection.connection.driver_connection
        with driver.cursor() as cursor, cursor.copy(  # type: ignore[union-attr]
                f"COPY {m.TransactionTransition.__tablename__} ({', '.join(STREAM_COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        return
    _insert_many(session, STREAM_COLUMNS, rows)


#: Rows per multi-row INSERT at most (store/statement_shapes.py: few sizes, so few prepared statements kept).
_MAX_ROWS_PER_INSERT = LARGEST_ROWS


def _insert_many(session: Target, columns: tuple[str, ...], rows: list[tuple[Any, ...]], *,
                 table: str = m.TransactionTransition.__tablename__, suffix: str = "") -> None:
    """SQLite: the rows in multi-row ``INSERT .. VALUES (..), (..), ..`` statements, in order (so their ids too).

    The tail commits on a writer thread (collect/txnlog_writer.py) beside the thread that fetches, decodes
    and applies.  CPython's sqlite3 binds each row with the GIL held and releases it only around each
    ``sqlite3_step``: an executemany hands the GIL back and forth once per row, and each time waits for the
    other thread to let go of it (a 20,000-row executemany took 3-7x its wall time beside a busy thread).
    Here one bind pass fills a statement of up to 64 rows, whose step then runs as one GIL-free stretch; the
    statements take a few row counts only (store/statement_shapes.py), so the connection's cache keeps a few
    prepared statements, not one per batch size.  Same values, bound the same way, as the executemany: the rows
    are byte-for-byte the same.
    ``suffix``: an ``ON CONFLICT ..`` clause; SQLite applies it row by row in order, as the executemany did."""
    connection = connection_of(session)
    if connection.dialect.name != "sqlite" or len(rows) < 2:
        mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
        connection.exec_driver_sql(f"INSERT INTO {table} ({', '.join(columns)}) "
                                   f"VALUES ({', '.join([mark] * len(columns))}){suffix}", rows)
        return
    dbapi = connection.connection.driver_connection
    cursor = dbapi.cursor()  # type: ignore[union-attr]  # the sqlite3 connection under the session
    try:
        insert_rows(cursor, table, columns, rows, suffix, _MAX_ROWS_PER_INSERT)
    finally:
        cursor.close()


def _insert_plain(session: Target, columns: tuple[str, ...], rows: list[tuple[Any, ...]]) -> None:
    """Plain tuples into models.TransactionTransition in one driver-level executemany."""
    connection = connection_of(session)
    mark = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    connection.exec_driver_sql(f"INSERT INTO {m.TransactionTransition.__tablename__} ({', '.join(columns)}) "
                               f"VALUES ({', '.join([mark] * len(columns))})", rows)


def anomaly_kind(x: Transition) -> str:
    """The anomaly a transition shows (its first event of ANOMALIES), as the ``anomaly`` column holds it."""
    return next((e for e in x.events if e in ANOMALIES), x.events[0] if x.events else "unknown")


def anomaly_rows(cluster_id: int, staged_at_ms: int, anomalies: Iterable[Transition]) -> list[tuple[Any, ...]]:
    """Plain tuples in ANOMALY_COLUMNS order."""
    anomalies = list(anomalies)
    return [(*row, anomaly_kind(x)) for row, x in zip(stream_rows(cluster_id, staged_at_ms, anomalies), anomalies,
                                                         strict=True)]


_ID_COLUMNS = ("cluster_id", "source", "transactional_id", "id_hash", "state", "producer_id", "producer_epoch",
               "timeout_ms", "txn_started_at", "last_update_at", "first_seen_at", "last_seen_at", "superseded",
               "partitions", "client_transaction_version", "client_tv", "abort_origin", "log_partition", "log_offset",
               "commits", "aborts", "epoch_bumps", "fences", "timeout_aborts")
#: Kept from the row's first write: when the log first spoke of the id.
_ID_INSERT_ONLY = ("first_seen_at",)
_ID_KEY = ("cluster_id", "id_hash", "source")


def _sql_time(ms: int | None, sqlite_text: bool) -> Any:
    """As SQLAlchemy's UtcDateTime stores it: an aware datetime for PostgreSQL, its text form on SQLite."""
    if ms is None:
        return None
    at = from_ms(ms)
    return sqlite_time(at) if sqlite_text else at


def _upsert_ids(session: Target, cluster_id: int, changed: list[tuple[str, IdState]]) -> None:
    """The ids' ``transaction_log`` rows of txn_ids (models.TransactionState), driver-level (an executemany, or on
    SQLite multi-row statements, see _insert_many): the SQL (INSERT .. ON CONFLICT DO UPDATE) is the same on both
    backends, and a busy cluster changes thousands
    of ids per batch, too many for per-row ORM parameter processing.  Writing a row makes it win again
    (``superseded`` false) if polling had taken over meanwhile."""
    connection = connection_of(session)
    sqlite_text = connection.dialect.name == "sqlite"
    rows = []
    for tid, s in changed:
        updated = _sql_time(s.last_update_ms, sqlite_text)
        rows.append((cluster_id, m.TRANSACTION_LOG, tid, m.id_hash(tid), _NAMES[s.state], s.producer_id,
                     s.producer_epoch, s.timeout_ms, _sql_time(s.start_ms, sqlite_text), updated, updated, updated,
                     False, json.dumps(_tp(s.partitions)), s.client_transaction_version, s.client_tv, s.abort,
                     s.log_partition, s.offset, s.commits, s.aborts, s.epoch_bumps, s.fences, s.timeout_aborts))
    _insert_many(session, _ID_COLUMNS, rows, table=m.TransactionState.__tablename__, suffix=_ID_UPSERT)


_ID_UPSERT = (f" ON CONFLICT ({', '.join(_ID_KEY)}) DO UPDATE SET "
              + ", ".join(f"{c} = excluded.{c}" for c in _ID_COLUMNS if c not in _ID_KEY and c not in _ID_INSERT_ONLY))
_NAMES = {state: state.value for state in TxnState}


def write_batch(session: Target, cluster_id: int, positions: Mapping[int, int], findings: TxnLogFindings,
                extra_anomalies: Iterable[Transition] = (), *, stage_transitions: bool = True) -> None:
    """Everything one applied batch produced, with the positions it reached; the caller commits once.

    ``session``: the caller's Session, or a Core connection in a transaction (the tail's writer thread: a Session's
    begin, flush bookkeeping and close cost a small commit more than its statements, issue 25)."""
    now = datetime.now(_UTC)
    connection = connection_of(session)
    write_progress(connection, cluster_id, positions, findings, now)
    changed = [(tid, s) for tid, s in findings.changed.items() if s is not None]
    if changed:
        _upsert_ids(connection, cluster_id, changed)
    gone = [tid for tid, s in findings.changed.items() if s is None]
    if gone:
        T = m.TransactionState
        connection.execute(delete(T).where(T.cluster_id == cluster_id, T.source == m.TRANSACTION_LOG,
                                        T.id_hash.in_([m.id_hash(tid) for tid in gone])))
    if stage_transitions and findings.transitions:
        stage_transitions_of(connection, cluster_id, to_ms(now), findings.transitions)
    anomalies = anomaly_rows(cluster_id, to_ms(now), (*findings.anomalies, *extra_anomalies))
    if anomalies:
        _insert_plain(connection, ANOMALY_COLUMNS, anomalies)


def write_batch_isolating(session: Session, cluster_id: int, positions: Mapping[int, int],
                          findings: TxnLogFindings, rejections: Rejections) -> frozenset[str]:
    """:func:`write_batch` after a refusal: the ids whose rows the database refuses (a NUL character in a
    tenant's id, on PostgreSQL) are found in SAVEPOINTs and left out; everything else, the positions included,
    commits.  Counters and aggregates keep the refused ids' records: they count what the log holds."""
    ids = sorted({*findings.changed, *(x.transactional_id for x in findings.transitions)})

    def attempt(part: list[str]) -> None:
        write_batch(session, cluster_id, {}, _only(findings, frozenset(part)))

    refused = frozenset(tid for tid, _ in rejections.isolate(session, "transaction_log_id", ids, attempt,
                                                              check_only=True))
    accepted = frozenset(ids) - refused
    write_batch(session, cluster_id, positions, replace(_only(findings, accepted), counts=findings.counts,
                                                        buckets=findings.buckets))
    return refused


def _only(findings: TxnLogFindings, ids: frozenset[str]) -> TxnLogFindings:
    return TxnLogFindings(transitions=tuple(x for x in findings.transitions if x.transactional_id in ids),
                          changed={tid: s for tid, s in findings.changed.items() if tid in ids})


def write_anomalies(session: Target, cluster_id: int, anomalies: Iterable[Transition]) -> None:
    rows = anomaly_rows(cluster_id, to_ms(datetime.now(_UTC)), anomalies)
    if rows:
        _insert_plain(session, ANOMALY_COLUMNS, rows)


def load(session: Session, cluster_id: int) -> Resumed:
    """The committed positions, per-id states and counters of a cluster (empty on a first start)."""
    positions = dict(session.execute(
        select(t.TxnLogPosition.log_partition, t.TxnLogPosition.next_offset)
        .where(t.TxnLogPosition.cluster_id == cluster_id)).all())
    counters = dict(session.execute(
        select(t.TxnLogCounter.name, t.TxnLogCounter.value).where(t.TxnLogCounter.cluster_id == cluster_id))
        .all())
    ids: dict[str, IdState] = {}
    T = m.TransactionState
    for r in session.scalars(select(T).where(T.cluster_id == cluster_id, T.source == m.TRANSACTION_LOG)):
        ids[r.transactional_id] = IdState(
            TxnState.parse(r.state), r.producer_id, r.producer_epoch, r.timeout_ms, (to_ms(r.txn_started_at) if r.txn_started_at is not None else None),
            (to_ms(r.last_update_at) if r.last_update_at is not None else 0), tuple(split_topic_partition(tp) for tp in r.partitions or ()), r.client_transaction_version,
            r.client_tv, r.abort_origin, r.log_partition or 0, r.log_offset or 0, r.commits, r.aborts, r.epoch_bumps,
            r.fences, r.timeout_aborts)
    reported: set[tuple[str, int, int, str]] = set()
    A = m.TransactionTransition
    for tid, pid, epoch, kind in session.execute(
            select(A.transactional_id, A.producer_id, A.producer_epoch, A.anomaly)
            .where(A.cluster_id == cluster_id, A.anomaly.is_not(None),
                   A.anomaly.in_((STUCK_PREPARE, LONG_TRANSACTION)))):
        s = ids.get(tid)
        if s is not None and kind is not None and (s.producer_id, s.producer_epoch) == (pid, epoch):
            reported.add((tid, pid, epoch, kind))
    return Resumed(positions, TxnLogState(ids, frozenset(reported)), counters)
