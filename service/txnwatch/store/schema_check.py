"""The daemon's start-up schema check, run in a child process.

Why a child: Alembic brings Mako (and, through Mako's plugin, Pygments when installed): about 10 MB
that would stay resident in the daemon for a check it does once (issue 18: idle RSS <= 100 MB).
SQLite (the embedded default) is migrated here; PostgreSQL must already be at head (`txnwatch
migrate`, the chart's hook Job).  The database URL travels in the environment, never on the command
line.  Exit status: 0 ready, 3 schema not at head, 1 database unusable; the reason is on stderr.

    python -m txnwatch.store.schema_check
"""

from __future__ import annotations

import os
import subprocess
import sys

URL_ENV = "TXNWATCH_SCHEMA_CHECK_DATABASE_URL"
READY, UNUSABLE, NOT_AT_HEAD = 0, 1, 3


def check_in_child(database_url: str, timeout_s: float = 600) -> tuple[int, str]:
    """(status, reason) from a child that migrates SQLite or checks PostgreSQL is at head."""
    env = dict(os.environ, **{URL_ENV: database_url})
    try:
        done = subprocess.run([sys.executable, "-m", "txnwatch.store.schema_check"], env=env, capture_output=True,
                              text=True, stdin=subprocess.DEVNULL, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return UNUSABLE, f"the schema check could not run: {exc}"
    reason = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
    return done.returncode, reason


def _check(url: str) -> tuple[int, str]:
    from alembic.script import ScriptDirectory

    from txnwatch.store.migrate import alembic_config, current, upgrade

    if url.startswith("sqlite"):
        upgrade(url)
        return READY, ""
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    have = current(url)
    if have != head:
        return NOT_AT_HEAD, f"database schema is at {have or 'nothing'}, expected {head}: run `txnwatch migrate`"
    return READY, ""


def main() -> int:
    try:
        status, reason = _check(os.environ[URL_ENV])
    except Exception as exc:
        status, reason = UNUSABLE, (str(exc).strip().splitlines() or [exc.__class__.__name__])[0]
    if reason:
        print(reason, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
