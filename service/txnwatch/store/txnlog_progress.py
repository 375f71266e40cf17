"""Where the transaction-log tail got to and what it counted: its positions, counters and per-minute aggregates.

Written with every commit of the tail (store/txnlog.py :func:`~txnwatch.store.txnlog.write_batch`), in its
transaction.  Rows are added to (counters, aggregates) or replaced (positions) with ``INSERT .. ON CONFLICT DO
UPDATE``: Core's upserts on PostgreSQL, the same statements with plain tuples on SQLite.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import Table, case

from txnwatch.core.epoch import from_ms
from txnwatch.core.vocabulary import (
    ABORT,
    COMMIT,
    EPOCH_BUMP,
    EXPIRED,
    FENCED,
    ILLEGAL_TRANSITION,
    PRODUCER_ID_CHANGE,
    TIMEOUT_ABORT,
)
from txnwatch.detect.txnlog import TxnLogFindings
from txnwatch.store import models as m
from txnwatch.store import txnlog_models as t
from txnwatch.store.db import Target, connection_of
from txnwatch.store.statement_shapes import insert_rows
from txnwatch.store.upsert import insert_for

_UTC = UTC

_AGGREGATE_COLUMNS = {COMMIT: "commits", ABORT: "aborts", TIMEOUT_ABORT: "timeout_aborts", FENCED: "fences",
                      EPOCH_BUMP: "epoch_bumps", PRODUCER_ID_CHANGE: "producer_id_changes", EXPIRED: "expirations",
                      ILLEGAL_TRANSITION: "illegal_transitions", "duration_ms_sum": "duration_ms_sum",
                      "duration_count": "duration_count", "duration_ms_max": "duration_ms_max"}


def _table(model: type[m.Base]) -> Table:
    return cast(Table, model.__table__)


@functools.cache
def _position_upsert(dialect: str) -> Any:
    """Built once per dialect and reused: the tail commits about once a second, and building the construct
    anew each time (with its ON CONFLICT clause) was a seventh of the tail thread's CPU.  A statement is
    immutable, so sharing it between sessions and threads is safe; SQLAlchemy's compiled cache does the rest."""
    stmt = insert_for(dialect, _table(t.TxnLogPosition))
    return stmt.on_conflict_do_update(
        index_elements=["cluster_id", "log_partition"],
        set_={"next_offset": stmt.excluded.next_offset, "updated_at": stmt.excluded.updated_at})


@functools.cache
def _counter_upsert(dialect: str) -> Any:
    """Adds to a counter (see :func:`_position_upsert` for why it is built once)."""
    table = _table(t.TxnLogCounter)
    stmt = insert_for(dialect, table)
    return stmt.on_conflict_do_update(index_elements=["cluster_id", "name"],
                                      set_={"value": table.c.value + stmt.excluded.value})


@functools.cache
def _aggregate_upsert(dialect: str) -> Any:
    """Adds to a minute's aggregate, keeping the larger maximum (built once, as :func:`_position_upsert`)."""
    table = _table(t.TxnLogAggregate)
    stmt = insert_for(dialect, table)
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

Rows = list[tuple[Any, ...]]


def _progress_rows(cluster_id: int, positions: Mapping[int, int], findings: TxnLogFindings, at: Any,
                   bucket_time: Callable[[int], Any]) -> tuple[Rows, Rows, Rows]:
    """The positions', counters' and aggregates' rows (in ``_POSITION_COLUMNS``, ``_COUNTER_COLUMNS`` and
    ``_AGGREGATE_ROW`` order), each backend's times given: ``at`` for the positions, ``bucket_time`` of a minute."""
    position_rows = [(cluster_id, p, o, at) for p, o in sorted(positions.items())]
    counter_rows = [(cluster_id, k, v) for k, v in sorted(findings.counts.items()) if v]
    bucket_rows = []
    for bucket_ms, values in sorted(findings.buckets.items()):
        row: list[Any] = [0] * len(_AGGREGATE_SLOT)
        for key, value in values.items():
            slot = _AGGREGATE_SLOT.get(key)
            if slot is not None:
                row[slot] = value
        bucket_rows.append((cluster_id, bucket_time(bucket_ms), *row))
    return position_rows, counter_rows, bucket_rows


def _upsert_sqlite(target: Target, cluster_id: int, positions: Mapping[int, int], findings: TxnLogFindings,
                   now: datetime) -> None:
    """SQLite: the positions, counters and aggregates as plain tuples through the sqlite3 cursor under ``target``.

    On a trickle (a few rows per commit, about one commit per fetch round) Core's three upserts were most of
    the writer thread's CPU (issue 25): each ``Session.execute`` built its parameters through the compiled
    statement, ran every value through its type, and set up a result.  Here the values are bound as Core binds
    them on SQLite (integers, text; times as the DATETIME text, :func:`sqlite_time`), in the same statements
    (the same ON CONFLICT clauses as :func:`_position_upsert`, :func:`_counter_upsert`, :func:`_aggregate_upsert`),
    so the rows are the same (tests/store/test_txnlog_upserts.py compares them with Core's)."""
    rows = _progress_rows(cluster_id, positions, findings, sqlite_time(now.astimezone(_UTC)),
                          lambda ms: sqlite_time(from_ms(ms)))
    cursor = connection_of(target).connection.driver_connection.cursor()  # type: ignore[union-attr]
    try:
        for table, columns, conflict, table_rows in zip(
                (t.TxnLogPosition, t.TxnLogCounter, t.TxnLogAggregate),
                (_POSITION_COLUMNS, _COUNTER_COLUMNS, _AGGREGATE_ROW),
                (_POSITION_CONFLICT, _COUNTER_CONFLICT, _AGGREGATE_CONFLICT), rows, strict=True):
            if table_rows:
                insert_rows(cursor, table.__tablename__, columns, table_rows, conflict)
    finally:
        cursor.close()


def _upsert_core(target: Target, dialect: str, cluster_id: int, positions: Mapping[int, int],
                 findings: TxnLogFindings, now: datetime) -> None:
    """The positions, counters and aggregates through Core's upserts (PostgreSQL, and any other backend)."""
    rows = _progress_rows(cluster_id, positions, findings, now, from_ms)
    for upsert, columns, table_rows in zip((_position_upsert, _counter_upsert, _aggregate_upsert),
                                           (_POSITION_COLUMNS, _COUNTER_COLUMNS, _AGGREGATE_ROW), rows, strict=True):
        if table_rows:
            target.execute(upsert(dialect), [dict(zip(columns, row, strict=True)) for row in table_rows])


def sqlite_time(at: datetime) -> str:
    """An aware UTC datetime as SQLAlchemy's SQLite DATETIME stores it (``%Y-%m-%d %H:%M:%S.%f``)."""
    # isoformat cut before its offset is strftime's text, at half the cost (each commit writes every id changed
    # since the last, two times each); strftime's %Y does not pad a year below 1000 (only a damaged time).
    return at.isoformat(" ", "microseconds")[:26] if at.year >= 1000 else at.strftime("%Y-%m-%d %H:%M:%S.%f")
