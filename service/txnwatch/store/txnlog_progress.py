"""Where the transaction-log tail got to and what it counted: its positions, counters and per-minute aggregates.

Written with every commit of the tail (store/txnlog.py :func:`~txnwatch.store.txnlog.write_batch`), in its
transaction.  Rows are added to (counters, aggregates) or replaced (positions) with ``INSERT .. ON CONFLICT DO
UPDATE``: Core's upserts on PostgreSQL, the same statements with plain tuples on SQLite.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import chain
from typing import Any, cast

from sqlalchemy import Table, case
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from txnwatch.core.epoch import from_ms
from txnwatch.detect.txnlog import (
    ABORT,
    COMMIT,
    EPOCH_BUMP,
    EXPIRED,
    FENCED,
    ILLEGAL,
    PRODUCER_ID_CHANGE,
    TIMEOUT_ABORT,
    TxnLogFindings,
)
from txnwatch.store import models as m
from txnwatch.store import txnlog_models as t
from txnwatch.store.statement_shapes import LARGEST_ROWS, chunk_sizes, rows_per_statement
from txnwatch.store.upsert import insert_for

_UTC = UTC

#: Where the tail's rows go: a Session's transaction, or a Core connection's (the tail's writer thread).
Target = Session | Connection


def connection_of(target: Target) -> Connection:
    """The connection ``target`` writes through (a Session's, in its transaction)."""
    return target if isinstance(target, Connection) else target.connection()
_AGGREGATE_COLUMNS = {COMMIT: "commits", ABORT: "aborts", TIMEOUT_ABORT: "timeout_aborts", FENCED: "fences",
                      EPOCH_BUMP: "epoch_bumps", PRODUCER_ID_CHANGE: "producer_id_changes", EXPIRED: "expirations",
                      ILLEGAL: "illegal_transitions", "duration_ms_sum": "duration_ms_sum",
                      "duration_count": "duration_count", "duration_ms_max": "duration_ms_max"}


def _table(model: type[m.Base]) -> Table:
    return cast(Table, model.__table__)


def _insert(dialect: str, table: Table) -> Any:
    return insert_for(dialect, table)

@functools.cache
def _position_upsert(dialect: str) -> Any:
    """Built once per dialect and reused: the tail commits about once a second, and building the construct
    anew each time (with its ON CONFLICT clause) was a seventh of the tail thread's CPU.  A statement is
    immutable, so sharing it between sessions and threads is safe; SQLAlchemy's compiled cache does the rest."""
    stmt = _insert(dialect, _table(t.TxnLogPosition))
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "log_partition"],
        set_={"next_offset": stmt.excluded.next_offset, "updated_at": stmt.excluded.updated_at})


@functools.cache
def _counter_upsert(dialect: str) -> Any:
    """Adds to a counter (see :func:`_position_upsert` for why it is built once)."""
    table = _table(t.TxnLogCounter)
    stmt = _insert(dialect, table)
    return stmt.on_conflict_do_update(index_elements=["cluster_id", "name"],
                                      set_={"value": table.c.value + stmt.excluded.value})


@functools.cache
def _aggregate_upsert(dialect: str) -> Any:
    """Adds to a minute's aggregate, keeping the larger maximum (built once, as :func:`_position_upsert`)."""
    table = _table(t.TxnLogAggregate)
    stmt = _insert(dialect, table)
    set_ = {c: table.c[c] + stmt.excluded[c] for c in _AGGREGATE_COLUMNS.values() if c != "duration_ms_max"}
    set_["duration_ms_max"] = case((stmt.excluded.duration_ms_max > table.c.duration_ms_max,
                                    stmt.excluded.duration_ms_max), else_=table.c.duration_ms_max)
    return stmt.on_conflict_do_update(index_elements=["cluster_id", "bucket_start"], set_=set_)



def write_progress(target: Target, cluster_id: int, positions: Mapping[int, int], findings: TxnLogFindings,
                   now: datetime) -> None:
    """The positions that moved, the counts that are not zero and the minutes that saw records, at ``now``."""
    if not (positions or findings.counts or findings.buckets):
        return
    dialect = connection_of(target).dialect.name
    if dialect == "sqlite":
        _upsert_sqlite(target, cluster_id, positions, findings, now)
    else:
        _upsert_core(target, dialect, cluster_id, positions, findings, now)


_POSITION_COLUMNS = ("cluster_id", "log_partition", "next_offset", "updated_at")
_POSITION_CONFLICT = (" ON CONFLICT (cluster_id, log_partition) DO UPDATE SET next_offset = excluded.next_offset, "
                      "updated_at = excluded.updated_at")
_COUNTER_COLUMNS = ("cluster_id", "name", "value")
_COUNTER_CONFLICT = " ON CONFLICT (cluster_id, name) DO UPDATE SET value = txnlog_counters.value + excluded.value"
_AGGREGATE_ROW = ("cluster_id", "bucket_start", *_AGGREGATE_COLUMNS.values())
_AGGREGATE_SLOT = {key: i for i, key in enumerate(_AGGREGATE_COLUMNS)}
_AGGREGATE_CONFLICT = (" ON CONFLICT (cluster_id, bucket_start) DO UPDATE SET "
                       + ", ".join(f"{c} = txnlog_aggregates.{c} + excluded.{c}" for c in _AGGREGATE_COLUMNS.values()
                                   if c != "duration_ms_max")
                       + ", duration_ms_max = CASE WHEN (excluded.duration_ms_max > txnlog_aggregates.duration_ms_max)"
                         " THEN excluded.duration_ms_max ELSE txnlog_aggregates.duration_ms_max END")


def _upsert_sqlite(target: Target, cluster_id: int, positions: Mapping[int, int], findings: TxnLogFindings,
                   now: datetime) -> None:
    """SQLite: the positions, counters and aggregates as plain tuples through the sqlite3 cursor under ``target``.

    On a trickle (a few rows per commit, about one commit per fetch round) Core's three upserts were most of
    the writer thread's CPU (issue 25): each ``Session.execute`` built its parameters through the compiled
    statement, ran every value through its type, and set up a result.  Here the values are bound as Core binds
    them on SQLite (integers, text; times as the DATETIME text, :func:`sqlite_time`), in the same statements
    (the same ON CONFLICT clauses as :func:`_position_upsert`, :func:`_counter_upsert`, :func:`_aggregate_upsert`),
    so the rows are the same (tests/store/test_txnlog_upserts.py compares them with Core's)."""
    cursor = connection_of(target).connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        if positions:
            at = sqlite_time(now.astimezone(_UTC))
            insert_rows(cursor, t.TxnLogPosition.__tablename__, _POSITION_COLUMNS,
                        [(cluster_id, p, o, at) for p, o in sorted(positions.items())], _POSITION_CONFLICT)
        counts = [(cluster_id, k, v) for k, v in sorted(findings.counts.items()) if v]
        if counts:
            insert_rows(cursor, t.TxnLogCounter.__tablename__, _COUNTER_COLUMNS, counts, _COUNTER_CONFLICT)
        if findings.buckets:
            buckets = []
            for bucket_ms, values in sorted(findings.buckets.items()):
                row: list[Any] = [0] * len(_AGGREGATE_SLOT)
                for key, value in values.items():
                    slot = _AGGREGATE_SLOT.get(key)
                    if slot is not None:
                        row[slot] = value
                buckets.append((cluster_id, sqlite_time(from_ms(bucket_ms)), *row))
            insert_rows(cursor, t.TxnLogAggregate.__tablename__, _AGGREGATE_ROW, buckets, _AGGREGATE_CONFLICT)
    finally:
        cursor.close()


def _upsert_core(target: Target, dialect: str, cluster_id: int, positions: Mapping[int, int],
                 findings: TxnLogFindings, now: datetime) -> None:
    """The positions, counters and aggregates through Core's upserts (PostgreSQL, and any other backend)."""
    if positions:
        target.execute(_position_upsert(dialect),
                        [dict(cluster_id=cluster_id, log_partition=p, next_offset=o, updated_at=now)
                         for p, o in sorted(positions.items())])
    counts = {k: v for k, v in findings.counts.items() if v}
    if counts:
        target.execute(_counter_upsert(dialect),
                        [dict(cluster_id=cluster_id, name=k, value=v) for k, v in sorted(counts.items())])
    if findings.buckets:
        buckets = []
        for bucket_ms, values in sorted(findings.buckets.items()):
            bucket: dict[str, Any] = dict.fromkeys(_AGGREGATE_COLUMNS.values(), 0)
            bucket.update(cluster_id=cluster_id, bucket_start=from_ms(bucket_ms))
            for key, value in values.items():
                if key in _AGGREGATE_COLUMNS:
                    bucket[_AGGREGATE_COLUMNS[key]] = value
            buckets.append(bucket)
        target.execute(_aggregate_upsert(dialect), buckets)


def insert_rows(cursor: Any, table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]], suffix: str = "",
                largest: int = LARGEST_ROWS) -> None:
    """``rows`` in statements of a few shapes (store/statement_shapes.py) through a sqlite3 cursor, in order."""
    per = rows_per_statement(cursor.connection, len(columns), largest)
    one = f"({', '.join(['?'] * len(columns))})"
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    start = 0
    for size in chunk_sizes(len(rows), per):
        chunk = rows[start:start + size]
        start += size
        cursor.execute(head + ", ".join([one] * size) + suffix, list(chain.from_iterable(chunk)))


def sqlite_time(at: datetime) -> str:
    """An aware UTC datetime as SQLAlchemy's SQLite DATETIME stores it (``%Y-%m-%d %H:%M:%S.%f``)."""
    # isoformat cut before its offset is strftime's text, at half the cost (each commit writes every id changed
    # since the last, two times each); strftime's %Y does not pad a year below 1000 (only a damaged time).
    return at.isoformat(" ", "microseconds")[:26] if at.year >= 1000 else at.strftime("%Y-%m-%d %H:%M:%S.%f")
