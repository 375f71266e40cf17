"""Schema migrations through Alembic, callable from the CLI, the app and tests."""

from __future__ import annotations

import os
from pathlib import Path

from alembic.config import Config

from alembic import command
from txnwatch.store.db import normalise_url

ALEMBIC_DIR_ENV = "TXNWATCH_ALEMBIC_DIR"


def _project_root() -> Path:
    # alembic/ lives at the repository (or image) root, two levels above service/txnwatch/.
    return Path(__file__).resolve().parents[3]


def alembic_config(url: str) -> Config:
    root = Path(os.environ.get(ALEMBIC_DIR_ENV) or _project_root())
    ini = root / "alembic.ini"
    if not ini.exists():
        raise FileNotFoundError(f"alembic.ini not found in {root}; set {ALEMBIC_DIR_ENV} to the directory holding it")
    cfg = Config(str(ini))
    cfg.set_main_option("script_location", str(root / "alembic"))
    cfg.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    cfg.attributes["configure_logger"] = False
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def current(url: str) -> str | None:
    from alembic.runtime.migration import MigrationContext

    from txnwatch.store.db import make_engine

    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            return MigrationContext.configure(conn).get_current_revision()
    finally:
        engine.dispose()
