"""The recorder's INSERTs of many rows into one table, cheaper on SQLite: the same rows, bound the same way.

SQLAlchemy Core's executemany of dicts (one dict per row) builds every row's parameters through the compiled
statement and runs every value through its column type's bind processor: a ``UtcDateTime`` is converted to UTC
and formatted as text once per row, although all the rows of a poll carry the poll's one timestamp.  On issue
25's peers lab (2,009 partitions, 12,015 group partitions) writing the poll's offset picture and lag sample that
way was about half of the polls' thread.  Here, on SQLite:

* each row becomes a plain tuple in one C call (``operator.itemgetter``); the offset picture already is one;
* each column's bind processor is the one Core would use (the column type's, on this dialect), run once per
  run of the same value *object*, column by column: a poll's timestamp is one object, so it is formatted once;
  columns every row shares (``cluster_id``, the picture's ``sampled_at``) are bound once and appended;
* the tuples go in multi-row ``INSERT .. VALUES (..), (..)`` statements of power-of-two row counts
  (store/statement_shapes.py), so the connection keeps a few prepared statements and parses none again.  Rows
  are inserted in order, so their ids are in the same order as the executemany's.

Through ``exec_driver_sql``: a row the database refuses raises the ``DBAPIError`` that the recorder isolates
(store/isolation.py), as before.  A table whose absent columns have Python-side defaults, rows whose keys differ,
and every other dialect keep Core's executemany (PostgreSQL's insertmanyvalues already sends few statements).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from txnwatch.store.statement_shapes import multirow_statements, rows_per_statement


def writes_tuples(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]],
                  extra: Mapping[str, Any]) -> bool:
    """True if ``insert_tuples`` writes these rows exactly as Core's executemany would."""
    if connection.dialect.name != "sqlite" or not rows:
        return False
    keys = rows[0].keys()
    if any(row.keys() != keys for row in rows):
        return False
    if keys & extra.keys():
        return False
    given = keys | extra.keys()
    if not given <= set(table.c.keys()):
        return False  # Core would refuse an unknown column: let it say so
    return all(column.default is None for column in table.c if column.key not in given)


def insert_dicts(connection: Connection, table: Table, rows: Sequence[Mapping[str, Any]],
                 extra: Mapping[str, Any]) -> None:
    """``rows`` (all with the same keys, checked by ``writes_tuples``) and ``extra`` into ``table``, in order."""
    keys = tuple(rows[0].keys())
    get: Callable[[Mapping[str, Any]], Any] = itemgetter(*keys)
    if len(keys) == 1:
        def get(row: Mapping[str, Any], key: str = keys[0]) -> tuple[Any, ...]:
            return (row[key],)
    insert_tuples(connection, table, keys, list(map(get, rows)), extra)


def insert_tuples(connection: Connection, table: Table, columns: Sequence[str], rows: Sequence[tuple[Any, ...]],
                  constants: Mapping[str, Any] | None = None) -> None:
    """Tuples of ``columns``' values, each followed by ``constants``' values (bound once), into ``table`` on
    SQLite, bound as Core binds them, in multi-row INSERTs."""
    if not rows:
        return
    constants = constants or {}
    bound = _bound(connection, table, columns, rows, constants)
    columns = (*columns, *constants)
    per = rows_per_statement(connection.connection.driver_connection, len(columns))
    quote = connection.dialect.identifier_preparer.quote
    head = f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) VALUES "
    for sql, parameters in multirow_statements(head, len(columns), bound, per):
        connection.exec_driver_sql(sql, parameters)


def _bound(connection: Connection, table: Table, columns: Sequence[str], rows: Sequence[tuple[Any, ...]],
           constants: Mapping[str, Any]) -> Sequence[tuple[Any, ...]]:
    """The rows followed by the constants, each value as its column's bind processor turns it: a constant once,
    a column's values once per distinct object (column by column, each row's tuple built once, in C)."""
    dialect = connection.dialect

    def processor(name: str) -> Callable[[Any], Any] | None:
        return table.c[name].type.dialect_impl(dialect).bind_processor(dialect)

    tail = tuple(v if (p := processor(name)) is None else p(v) for name, v in constants.items())
    processors = [(i, p) for i, name in enumerate(columns) if (p := processor(name)) is not None]
    if not processors:
        return [row + tail for row in rows] if tail else rows
    values: list[Sequence[Any]] = list(zip(*rows, strict=True))
    for i, process in processors:
        values[i] = _processed(values[i], process)
    return list(zip(*values, *(repeat(v, len(rows)) for v in tail), strict=True))


def _processed(values: Sequence[Any], process: Callable[[Any], Any]) -> list[Any]:
    """``process`` of each value, called once per run of the same object (a poll's rows share its timestamp)."""
    out = []
    last_in: Any = object()
    last_out: Any = None
    for value in values:
        if value is not last_in:
            last_in, last_out = value, process(value)
        out.append(last_out)
    return out
