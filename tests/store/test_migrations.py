"""The migrations and the models describe the same schema, on PostgreSQL and SQLite."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect

from txnwatch.store.db import make_engine
from txnwatch.store.migrate import current, downgrade, upgrade
from txnwatch.store.models import Base


def test_upgrade_head_matches_models(engine: Engine) -> None:
    with engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(ctx, Base.metadata)
    assert diff == [], f"models and migrations differ: {diff}"


def test_every_model_table_exists(engine: Engine) -> None:
    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) <= tables


def test_downgrade_then_upgrade(db_url: str) -> None:
    upgrade(db_url)
    assert current(db_url) is not None
    downgrade(db_url, "base")
    assert current(db_url) is None
    eng = make_engine(db_url)
    try:
        assert set(inspect(eng).get_table_names()) <= {"alembic_version"}
    finally:
        eng.dispose()
    upgrade(db_url)
    assert current(db_url) is not None
