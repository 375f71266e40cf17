"""`txnwatch abort` as Kafka's own tool works: a bootstrap server and a start offset, dry run unless --execute.

The command runs with a fake Kafka call (the only fake: the Kafka boundary) and a real SQLite audit table.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from tests.fixtures.migrated import migrate
from txnwatch.cli import abort as abort_cli
from txnwatch.cli import commands as cli
from txnwatch.core import exitcodes
from txnwatch.core.config import ClusterConfig
from txnwatch.core.model import AbortOutcome, TopicPartition
from txnwatch.runtime.admin import AbortTarget
from txnwatch.store.db import make_engine
from txnwatch.store.models import AdminAudit

CLUSTER = ClusterConfig(name="127.0.0.1-39092", bootstrap_servers="127.0.0.1:39092")
NOW = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)


@dataclass
class FakeKafka:
    """Answers as the partition leader would for one open transaction (producer 7, epoch 3) starting at offset 40."""

    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, cluster: ClusterConfig, tp: TopicPartition, producer_id: int | None, producer_epoch: int | None,
                 coordinator_epoch: int | None, *, dry_run: bool, start_offset: int | None = None) -> AbortOutcome:
        self.calls.append(dict(producer_id=producer_id, start_offset=start_offset, dry_run=dry_run))
        return AbortOutcome(tp=tp, producer_id=7, producer_epoch=3, coordinator_epoch=0, leader_id=2,
                            txn_start_offset=40, dry_run=dry_run, aborted=not dry_run)


@pytest.fixture
def database(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    migrate(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def _target(**kw: Any) -> AbortTarget:
    return AbortTarget(CLUSTER.name, "orders", 0, None, None, None, **({"start_offset": 40} | kw))


@pytest.mark.parametrize("execute", [False, True])
def test_start_offset_is_enough_and_the_call_is_audited(database: Any, execute: bool) -> None:
    kafka = FakeKafka()
    report = abort_cli.run(CLUSTER, _target(), execute=execute, abort_transaction=kafka,
                           audit_session=lambda: Session(database), actor="cli:bootstrap-server", now=lambda: NOW)
    assert report.exit_code == exitcodes.OK and report.warnings == ()
    assert kafka.calls == [dict(producer_id=None, start_offset=40, dry_run=not execute)]
    assert "id 7, epoch 3" in report.text and ("aborted" if execute else "would abort") in report.text
    assert ("dry run (add --execute to abort)" in report.text) is not execute
    with Session(database) as session:
        (row,) = session.scalars(select(AdminAudit)).all()
    assert (row.actor, row.dry_run, row.cluster) == ("cli:bootstrap-server", not execute, CLUSTER.name)
    assert row.target["start_offset"] == 40 and row.outcome == ("aborted" if execute else "would abort")


def test_without_a_database_it_runs_and_says_it_was_not_audited() -> None:
    report = abort_cli.run(CLUSTER, _target(), execute=False, abort_transaction=FakeKafka(), audit_session=None,
                           actor="cli:bootstrap-server", now=lambda: NOW)
    assert report.exit_code == exitcodes.OK and "not audited (no database configured)" in report.text


def test_an_unmigrated_database_costs_the_audit_not_the_abort(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    try:
        report = abort_cli.run(CLUSTER, _target(), execute=True, abort_transaction=FakeKafka(),
                               audit_session=lambda: Session(engine), actor="cli:x", now=lambda: NOW)
    finally:
        engine.dispose()
    assert report.exit_code == exitcodes.OK and "aborted" in report.text
    assert [w.split(":")[0:2] for w in report.warnings] == [["txnwatch", " the abort was not audited"]]


@pytest.mark.parametrize(("args", "message"), [
    pytest.param([], "give --start-offset, or --producer-id and --producer-epoch", id="nothing-names-it"),
    pytest.param(["--producer-id", "7"], "give --start-offset, or --producer-id and --producer-epoch",
                 id="id-without-epoch"),
    pytest.param(["--start-offset", "4", "--producer-id", "7", "--producer-epoch", "1"], "not both", id="both"),
])
def test_usage_errors_are_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli.app, ["abort", "-b", "127.0.0.1:9", "--topic", "t", "--partition", "0", *args],
                                env={"TXNWATCH_CONFIG": "", "TXNWATCH_DATABASE_URL": ""})
    assert result.exit_code == exitcodes.USAGE and message in result.output


def test_bootstrap_server_needs_no_config_file_nor_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No admin_enabled, no token, no file: it reaches Kafka (here: nobody listens, so exit 3, not 2)."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(cli.app, ["abort", "--bootstrap-server", "127.0.0.1:9", "--topic", "t",
                                          "--partition", "0", "--start-offset", "4"],
                                env={"TXNWATCH_CONFIG": "", "TXNWATCH_DATABASE_URL": "", "TXNWATCH_ADMIN_TOKEN": ""})
    assert result.exit_code == exitcodes.CLUSTER_UNREACHABLE, result.output
    assert "cluster unreachable" in result.output and "not audited (no database configured)" in result.output
    assert not (tmp_path / "var").exists(), "no database was created without being asked for"
