"""``column NOT IN (ids)`` whose SQL text on SQLite does not change with the number of ids.

A list of n values renders n placeholders, so each size of list is a statement of its own, and CPython's sqlite3
keeps each connection's last 128 prepared statements: a statement of 5,000 placeholders holds ~1 MB (its program
builds a temporary index of the values), and a poll whose count of transactional ids differs from the last
poll's prepares another one.  A daemon watching thousands of ids whose count moves would grow by ~1 MB a poll
up to 128 of them per connection (issue 25).  On SQLite the values travel as one JSON array, read back by
``json_each`` (SQLite 3.38+ has it built in): one statement text, prepared once; the rows it matches are the same.
PostgreSQL (psycopg prepares no statement run once), older SQLite and a list with a NUL character keep the
plain list.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import ColumnElement, func, literal_column, select

#: json_each is part of every SQLite from 3.38 (before it, only of builds with JSON1 enabled).
JSON_EACH_SINCE = (3, 38, 0)


def not_among(dialect: str, column: Any, values: Collection[str]) -> ColumnElement[bool]:
    """``column NOT IN values`` for a list of strings; on SQLite with one bound JSON array."""
    if dialect != "sqlite":
        return column.not_in(values)
    import sqlite3  # loaded already on SQLite (the driver); not imported for PostgreSQL

    if sqlite3.sqlite_version_info < JSON_EACH_SINCE:
        return column.not_in(values)
    array = json.dumps(list(values), ensure_ascii=False)
    if "\\u0000" in array:  # json_each cuts a string at an escaped NUL: such a list goes as it is
        return column.not_in(values)
    return column.not_in(
        select(literal_column("value")).select_from(func.json_each(array)).scalar_subquery())
