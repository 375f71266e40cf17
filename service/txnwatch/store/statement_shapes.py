"""How many rows each of SQLite's multi-row INSERTs takes: a few sizes, so a few prepared statements.

CPython's sqlite3 keeps every connection's last 128 prepared statements, keyed by their SQL text, and a
multi-row ``INSERT .. VALUES (..), (..)`` of n rows is a different text for every n.  A prepared statement
keeps ~1.8 KB per row of 20 columns (its program and one memory cell per bound value), and stays while the
connection lives: on the peers lab (issue 25) the tail's statements of every size it had written held 8-15 MB
of the daemon's heap after five minutes, growing, two of them (2,000 rows, written while the tail caught up)
3.3-3.7 MB each.  Cut into powers of two, a batch of any size is written by at most ``log2(largest) + 1``
different statements, reused from the cache (no parse either), which together keep ~2 x ``largest`` rows'
worth per connection.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

#: Rows per statement at most.  A statement of 64 rows still binds its values in one Python pass and steps once
#: without the GIL (an executemany hands the GIL over once per row); its shapes keep ~0.25 MB per connection.
LARGEST_ROWS = 64


#: Bound parameters per statement where SQLite cannot say (SQLITE_MAX_VARIABLE_NUMBER before SQLite 3.32).
SQLITE_VARIABLES = 999


def rows_per_statement(dbapi_connection: Any, columns: int, largest: int = LARGEST_ROWS) -> int:
    """The most rows of ``columns`` values one statement on this sqlite3 connection takes, at most ``largest``,
    as a power of two."""
    import sqlite3

    try:
        limit = int(dbapi_connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER))
    except (AttributeError, sqlite3.Error):
        limit = SQLITE_VARIABLES
    return largest_shape(min(largest, limit // columns))


def largest_shape(limit: int) -> int:
    """The largest power of two at most ``limit`` (and at least 1)."""
    return 1 << (max(1, limit).bit_length() - 1)


def chunk_sizes(rows: int, largest: int) -> list[int]:
    """``rows`` cut into statements of ``largest`` rows (a power of two), then the rest's binary digits, largest
    first: 150 rows with ``largest`` 64 are 64, 64, 16, 4, 2."""
    if largest & (largest - 1) or largest < 1:
        raise ValueError(f"largest must be a power of two, not {largest}")
    full, rest = divmod(rows, largest)
    sizes = [largest] * full
    bit = largest >> 1
    while bit:
        if rest & bit:
            sizes.append(bit)
        bit >>= 1
    return sizes


def multirow_statements(head: str, width: int, rows: Sequence[tuple[Any, ...]], per: int,
                        suffix: str = "") -> Iterator[tuple[str, tuple[Any, ...]]]:
    """``rows`` (of ``width`` values each) as (SQL, parameters) of ``head`` + ``VALUES``-lists of :func:`chunk_sizes`
    rows followed by ``suffix``, in order: the one place SQLite's multi-row INSERTs are built, whichever way they run
    (the recorder through its Core connection, the tail through the sqlite3 cursor)."""
    one = f"({', '.join(['?'] * width)})"
    start = 0
    for size in chunk_sizes(len(rows), per):
        yield head + ", ".join([one] * size) + suffix, tuple(chain.from_iterable(rows[start:start + size]))
        start += size


def insert_rows(cursor: Any, table: str, columns: tuple[str, ...], rows: Sequence[tuple[Any, ...]], suffix: str = "",
                largest: int = LARGEST_ROWS) -> None:
    """``rows`` into ``table`` through a sqlite3 cursor, in statements of a few shapes, in order."""
    per = rows_per_statement(cursor.connection, len(columns), largest)
    head = f"INSERT INTO {table} ({', '.join(columns)}) VALUES "
    for sql, parameters in multirow_statements(head, len(columns), rows, per, suffix):
        cursor.execute(sql, parameters)
