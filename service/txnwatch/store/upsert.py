"""``INSERT ... ON CONFLICT`` for the database in use, importing that database's dialect module only.

``from sqlalchemy.dialects import postgresql, sqlite`` at a module's top loads PostgreSQL's dialect (~2.3 MB
resident, issue 25) into a daemon that only ever writes SQLite; a PostgreSQL engine has it loaded already.
"""

from __future__ import annotations

from typing import Any


def insert_for(dialect: str, table: Any) -> Any:
    """The dialect's ``insert(table)``, which has ``on_conflict_do_update`` / ``on_conflict_do_nothing`` and
    ``excluded``; ``dialect`` is the engine's ``dialect.name``."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table)
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table)

