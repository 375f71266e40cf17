"""Retention archives before it deletes, and deletes nothing it could not archive."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import func, select

from tests.fixtures.migrated import migrate
from txnwatch.core.config import load_settings
from txnwatch.core.epoch import to_ms
from txnwatch.runtime.wiring import archive_then_purge, build_runtime
from txnwatch.store import models as m


def seed_old_transition(runtime) -> None:
    old = datetime.now(timezone.utc) - timedelta(days=30)
    with runtime.sessions.begin() as s:
        cluster = m.Cluster(name="c", bootstrap_servers="h:1", created_at=old)
        s.add(cluster)
        s.flush()
        s.add(m.TransactionTransition(cluster_id=cluster.id, source=m.POLL, transactional_id="app", at_ms=to_ms(old),
                           staged_at_ms=to_ms(old), from_state=None, to_state="Ongoing", producer_id=1,
                           producer_epoch=0, timeout_ms=60000, partitions="", events="new"))


def count(runtime) -> int:
    with runtime.sessions() as s:
        return int(s.scalar(select(func.count()).select_from(m.TransactionTransition)) or 0)


def test_old_history_is_archived_then_purged(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    archive = tmp_path / "archive"
    runtime = build_runtime(load_settings(None, database_url=url, retention=dict(days=14, archive_dir=str(archive))),
                            collect=False)
    seed_old_transition(runtime)
    archive_then_purge(runtime.settings)
    assert count(runtime) == 0
    assert list(archive.rglob("*.parquet")), "the purged rows must be in the archive"


def test_nothing_is_purged_when_archiving_fails(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    migrate(url)
    blocked = tmp_path / "not-a-dir"
    blocked.write_text("a file where the archive directory should be")
    runtime = build_runtime(load_settings(None, database_url=url, retention=dict(days=14, archive_dir=str(blocked / "a"))),
                            collect=False)
    seed_old_transition(runtime)
    archive_then_purge(runtime.settings)
    assert count(runtime) == 1
