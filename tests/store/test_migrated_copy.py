"""tests/fixtures/migrated.py's copy is the database ``upgrade()`` makes, and never replaces one that exists."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.fixtures.migrated import migrate
from txnwatch.store.migrate import upgrade


def _schema(path: Path) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str]]]:
    """Every table and index with the lines of its CREATE statement, sorted: alembic's batch mode rebuilds a
    SQLite table with its constraints in set order, which differs between two runs of ``upgrade()`` alone."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' "
                            "ORDER BY type, name").fetchall()
        version = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    objects = [(kind, name, sorted(line.strip().rstrip(",") for line in (sql or "").splitlines()))
               for kind, name, sql in rows]
    return objects, version


def test_a_copied_database_has_the_schema_and_revision_of_a_migrated_one(tmp_path: Path) -> None:
    upgraded, copied = tmp_path / "upgraded.db", tmp_path / "copied.db"
    upgrade(f"sqlite:///{upgraded}")
    migrate(f"sqlite:///{copied}")
    objects, version = _schema(copied)
    assert (objects, version) == _schema(upgraded)
    assert len(version) == 1 and any(name == "alembic_version" for _, name, _ in objects)


def test_an_existing_database_is_upgraded_in_place_not_replaced(tmp_path: Path) -> None:
    path = tmp_path / "kept.db"
    migrate(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE kept_by_the_test (x INTEGER)")
    migrate(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'kept_by_the_test'").fetchall() \
            == [("kept_by_the_test",)]


def test_a_database_in_a_directory_not_yet_made_is_created_as_upgrade_creates_it(tmp_path: Path) -> None:
    path = tmp_path / "not" / "yet" / "made.db"
    migrate(f"sqlite:///{path}")
    assert _schema(path)[1] == _schema_of_upgraded(tmp_path)[1]


def _schema_of_upgraded(tmp_path: Path) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str]]]:
    path = tmp_path / "reference.db"
    upgrade(f"sqlite:///{path}")
    return _schema(path)
