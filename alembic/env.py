"""Alembic environment: migrations run against txnwatch's own models and settings."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from txnwatch.store import (
    console_sessions,  # noqa: F401  (the console's sessions for autogenerate)
    lease_models,  # noqa: F401  (fleet tables for autogenerate)
    rollup_models,  # noqa: F401  (rollup tables for autogenerate)
    txnlog_models,  # noqa: F401  (transaction-log tables for autogenerate)
)
from txnwatch.store.db import make_engine, normalise_url
from txnwatch.store.models import Base, UtcDateTime

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        from txnwatch.core.config import load_settings

        url = load_settings().database_url
    return normalise_url(url)


def run_migrations_offline() -> None:
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    engine = make_engine(_url())
    with engine.connect() as connection:
        _run(connection)
    engine.dispose()


def _render_item(type_: str, obj: object, autogen_context: object) -> str | bool:
    """Render UtcDateTime as a plain aware DateTime so migrations never import app code."""
    if type_ == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _run(connection) -> None:  # type: ignore[no-untyped-def]  # Alembic hands over an untyped connection
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
    )
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
