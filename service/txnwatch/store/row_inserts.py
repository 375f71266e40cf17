"""The recorder's INSERTs of many rows into one table, cheaper on SQLite: the same rows, bound the same way.

SQLAlchemy Core's executemany of dicts (one dict per row) builds every row's parameters through the compiled
statement and runs every value through its column type's bind processor: a ``UtcDateTime`` is converted to UTC
and formatted as text once per row, although all the rows of a poll carry the poll's one timestamp.  On issue
25's peers lab (2,009 partitions, 12,015 group partitions) writing the poll's offset picture and lag sample that
way was about half of the polls' thread.  Here, on SQLite:

* each row becomes a plain tuple in one C call (``operator.itemgetter``), the extra columns (``cluster_id``)
  appended as one constant tuple;
* each column's bind processor is the one Core would use (the column type's, on this dialect), run once per
  distinct value *object*: a poll's timestamp is one object, so it is formatted once;
* the tuples go in multi-row ``INSERT .. VALUES (..), (..)`` statements of power-of-two row counts
  (store/statement_shapes.py), so the connection keeps a few prepared statements and parses none again.  Rows
  are inserted in order, so their ids are in the same order as the executemany's.

Through ``exec_driver_sql``: a row the database refuses raises the ``DBAPIError`` that the recorder isolates
(store/isolation.py), as before.  A table whose absent columns have Python-side defaults, rows whose keys differ,
and every other dialect keep Core's executemany (PostgreSQL's insertmanyvalues already sends few statements).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from operator import itemgetter
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from txnwatch.store.statement_shapes import LARGEST_ROWS, chunk_sizes, largest_shape

#: Bound parameters per statement where SQLite cannot say (SQLITE_MAX_VARIABLE_NUMBER before SQLite 3.32).
_SQLITE_VARIABLES = 999


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
    constant = tuple(extra.values())
    insert_tuples(connection, table, (*keys, *extra.keys()), [get(row) + constant for row in rows])


def insert_tuples(connection: Connection, table: Table, columns: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
    """Tuples of ``columns``' values into ``table`` on SQLite, bound as Core binds them, in multi-row INSERTs."""
    rows = _bound(connection, table, columns, rows)
    per = _rows_per_insert(connection, len(columns))
    one = f"({', '.join(['?'] * len(columns))})"
    quote = connection.dialect.identifier_preparer.quote
    head = f"INSERT INTO {quote(table.name)} ({', '.join(quote(c) for c in columns)}) VALUES "
    start = 0
    for size in chunk_sizes(len(rows), per):
        connection.exec_driver_sql(head + ", ".join([one] * size), tuple(chain.from_iterable(rows[start:start + size])))
        start += size


def _bound(connection: Connection, table: Table, columns: Sequence[str],
           rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The rows with each value as its column's bind processor turns it, each distinct object processed once."""
    dialect = connection.dialect
    processors = [(i, p) for i, name in enumerate(columns)
                  if (p := table.c[name].type.dialect_impl(dialect).bind_processor(dialect)) is not None]
    if not processors:
        return rows
    for i, process in processors:
        last_in: Any = object()
        last_out: Any = None
        out = []
        for row in rows:
            value = row[i]
            if value is not last_in:
                last_in, last_out = value, process(value)
            out.append((*row[:i], last_out, *row[i + 1:]))
        rows = out
    return rows


def _rows_per_insert(connection: Connection, columns: int) -> int:
    import sqlite3

    try:
        limit = int(connection.connection.driver_connection.getlimit(  # type: ignore[union-attr]
            sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    except (AttributeError, sqlite3.Error):
        limit = _SQLITE_VARIABLES
    return largest_shape(min(LARGEST_ROWS, limit // columns))
