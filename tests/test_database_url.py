"""The database URL: its password never printed back, ``postgres://`` accepted, and what cannot work said in one
line at ``config check``, ``migrate`` and ``run`` rather than as a traceback later (issue 23 item 10)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from txnwatch.core import exitcodes, logs
from txnwatch.core.config import ConfigError, load_settings
from txnwatch.store.db import normalise_url


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    return subprocess.run([sys.executable, "-m", "txnwatch", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)


def _config(tmp_path: Path, url: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"database_url: {url!r}\n")
    return path


def test_a_refused_database_url_is_not_printed_with_its_password(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_config(tmp_path, "mysql://txn:hunter2@db.example:3306/txn"))
    assert "hunter2" not in str(err.value)
    assert "mysql://txn:***@db.example:3306/txn" in str(err.value)  # the rest stays, to tell which URL it was


def test_a_url_without_scheme_is_not_echoed(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(_config(tmp_path, "txn:hunter2@db.example/txn"))
    assert "hunter2" not in str(err.value) and "not a URL" in str(err.value)


@pytest.mark.parametrize(("given", "engine_url"), [
    pytest.param("postgres://u:p@db:5432/t", "postgresql+psycopg://u:p@db:5432/t", id="postgres-alias"),
    pytest.param("postgresql://u:p@db/t", "postgresql+psycopg://u:p@db/t", id="postgresql"),
    pytest.param("postgresql+psycopg://u:p@db/t", "postgresql+psycopg://u:p@db/t", id="explicit-driver"),
])
def test_postgres_spellings_reach_psycopg(given: str, engine_url: str) -> None:
    settings = load_settings(None, database_url=given)
    assert normalise_url(settings.database_url) == engine_url


def test_migrate_accepts_the_postgres_alias(tmp_path: Path, postgres_url: str) -> None:
    """SQLAlchemy alone refuses ``postgres://`` (NoSuchModuleError: sqlalchemy.dialects:postgres)."""
    scheme, rest = postgres_url.split("://", 1)
    assert scheme.startswith("postgresql")
    result = _cli("migrate", "--config", str(_config(tmp_path, f"postgres://{rest}")))
    assert result.returncode == 0, result.stderr
    assert "database at revision" in result.stdout


def test_config_check_prints_the_url_masked(tmp_path: Path) -> None:
    result = _cli("config", "check", str(_config(tmp_path, "postgres://txn:hunter2@db.example:5432/txn")))
    assert result.returncode == 0, result.stderr
    assert "postgresql://txn:***@db.example:5432/txn" in result.stdout and "hunter2" not in result.stdout


IN_MEMORY = ["sqlite://", "sqlite:///:memory:"]


@pytest.mark.parametrize("command", [["config", "check"], ["migrate", "--config"], ["run", "--config"]])
@pytest.mark.parametrize("url", IN_MEMORY)
def test_in_memory_sqlite_is_refused_in_one_line(tmp_path: Path, command: list[str], url: str) -> None:
    """Before: `config check` and `migrate` passed, then `run` exited 3 ("Kafka unreachable") after 152 lines of
    tracebacks, each thread having opened an empty database of its own."""
    result = _cli(*command, str(_config(tmp_path, url)))
    assert result.returncode == exitcodes.USAGE, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "in-memory SQLite" in lines[0] and "threads and processes" in lines[0], result.stderr


@pytest.mark.parametrize("command", [["config", "check"], ["migrate", "--config"]])
def test_a_sqlite_path_that_cannot_be_created_is_one_line(tmp_path: Path, command: list[str]) -> None:
    """Before: `config check` said OK and `migrate` printed a 137-line traceback (FileNotFoundError)."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    for url in (f"sqlite:///{blocker}/sub/txnwatch.db", "sqlite:////proc/txnwatch/txnwatch.db"):
        result = _cli(*command, str(_config(tmp_path, url)))
        assert result.returncode == exitcodes.USAGE, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "SQLite database" in lines[0] and "Traceback" not in result.stderr, result.stderr


def test_migrate_failures_are_one_line_without_the_password(tmp_path: Path) -> None:
    import socket

    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    result = _cli("migrate", "--config", str(_config(tmp_path, f"postgres://txn:hunter2@127.0.0.1:{port}/txn")))
    assert result.returncode == exitcodes.FOUND_OR_FAILED
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("txnwatch: migration failed: OperationalError"), result.stderr
    assert "hunter2" not in result.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_lines_never_carry_a_url_password(capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    logs.configure("INFO", fmt)
    try:
        log = logging.getLogger("txnwatch.test")
        log.warning("exporter %s failed", "http://scraper:hunter2@kafka-1:7071/metrics")
        try:
            raise RuntimeError("connect to postgresql://txn:hunter2@db/txn failed")
        except RuntimeError:
            log.exception("database down")
        err = capsys.readouterr().err
        assert "hunter2" not in err
        assert "http://scraper:***@kafka-1:7071/metrics" in err and "postgresql://txn:***@db/txn" in err
    finally:
        logging.getLogger().handlers.clear()
