"""`txnwatch abort` as Kafka's own tool works: a bootstrap server and a start offset, dry run unless --execute.

The command runs with a fake Kafka call (the only fake: the Kafka boundary) and a real SQLite audit table.
"""

from __future__ import annotations

from collections.abc import Callable
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
from txnwatch.core.model import AbortOutcome, RequestError, TerminateOutcome, TopicPartition
from txnwatch.kafka.terminate import UNSUPPORTED_RELEASE, refuse_release
from txnwatch.remedy.audit import Audit, Who
from txnwatch.remedy.commands import AbortById, AbortPartition, AdminCalls
from txnwatch.store.db import make_engine
from txnwatch.store.models import AdminAudit

CLUSTER = ClusterConfig(name="127.0.0.1-39092", bootstrap_servers="127.0.0.1:39092")
NOW = datetime(2026, 11, 23, 3, 0, tzinfo=UTC)
WHO = Who("cli:bootstrap-server", "oncall@bastion-1")


@dataclass
class FakeKafka:
    """Answers as the partition leader would for one open transaction (producer 7, epoch 3) starting at offset 40;
    ``during`` runs inside the call, when Kafka is being asked."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    during: Callable[[], None] = lambda: None

    def __call__(self, cluster: ClusterConfig, tp: TopicPartition, producer_id: int | None, producer_epoch: int | None,
                 coordinator_epoch: int | None, *, dry_run: bool, start_offset: int | None = None) -> AbortOutcome:
        self.calls.append(dict(producer_id=producer_id, start_offset=start_offset, dry_run=dry_run))
        self.during()
        return AbortOutcome(tp=tp, producer_id=7, producer_epoch=3, coordinator_epoch=0, leader_id=2,
                            txn_start_offset=40, dry_run=dry_run, aborted=not dry_run)


@pytest.fixture
def database(tmp_path: Path) -> Any:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    migrate(url)
    engine = make_engine(url)
    yield engine
    engine.dispose()


def _command(**kw: Any) -> AbortPartition:
    return AbortPartition(CLUSTER.name, "orders", 0, None, None, None, **({"start_offset": 40} | kw))


def _run(kafka: FakeKafka, audit: Audit | None, *, execute: bool = True) -> abort_cli.AbortReport:
    return abort_cli.run(CLUSTER, _command(), execute=execute, calls=AdminCalls(kafka), audit=audit, who=WHO,
                         now=lambda: NOW)


def _rows(engine: Any) -> list[AdminAudit]:
    with Session(engine) as session:
        return list(session.scalars(select(AdminAudit).order_by(AdminAudit.id)))


@pytest.mark.parametrize("execute", [False, True])
def test_start_offset_is_enough_and_the_call_is_audited(database: Any, execute: bool) -> None:
    kafka = FakeKafka()
    report = _run(kafka, Audit(lambda: Session(database)), execute=execute)
    assert report.exit_code == exitcodes.OK and report.warnings == ()
    assert kafka.calls == [dict(producer_id=None, start_offset=40, dry_run=not execute)]
    assert "id 7, epoch 3" in report.text and ("aborted" if execute else "would abort") in report.text
    assert ("dry run (add --execute to abort)" in report.text) is not execute
    (row,) = _rows(database)
    assert (row.actor, row.client, row.dry_run, row.cluster) == ("cli:bootstrap-server", "oncall@bastion-1",
                                                                 not execute, CLUSTER.name)
    assert row.target["start_offset"] == 40 and row.outcome == ("aborted" if execute else "would abort")
    assert row.finished_at is not None and row.finished_at >= row.at


def test_the_intent_is_committed_before_kafka_is_asked(database: Any) -> None:
    """Read from another connection while Kafka is being asked: the row is there, committed, without an outcome."""
    seen: list[tuple[str, str | None, datetime | None]] = []
    kafka = FakeKafka(during=lambda: seen.extend((r.actor, r.outcome, r.finished_at) for r in _rows(database)))
    assert _run(kafka, Audit(lambda: Session(database))).exit_code == exitcodes.OK
    assert seen == [("cli:bootstrap-server", None, None)]
    assert [r.outcome for r in _rows(database)] == ["aborted"]


def test_without_a_database_it_runs_and_says_it_was_not_audited() -> None:
    report = _run(FakeKafka(), None, execute=False)
    assert report.exit_code == exitcodes.OK and "not audited (no database configured)" in report.text


def test_an_unmigrated_database_stops_the_abort_before_kafka(tmp_path: Path) -> None:
    """The intent cannot be written (no audit table): nothing is sent, one line says so, exit 6."""
    engine = make_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    kafka = FakeKafka()
    try:
        report = _run(kafka, Audit(lambda: Session(engine)))
    finally:
        engine.dispose()
    assert kafka.calls == []
    assert (report.exit_code, report.text) == (exitcodes.NOT_AUDITED, "")
    assert report.warnings == ("txnwatch: nothing was sent to Kafka: the audit could not record the intent (no such "
                               "table: admin_audit); it is safe to retry once the database accepts writes",)


def test_an_outcome_the_database_no_longer_takes_says_the_abort_happened(database: Any) -> None:
    """The table goes while Kafka is asked: the abort stands (exit 0), the report and a line say it is not
    recorded, and never to run it again."""
    def drop() -> None:
        with database.begin() as conn:
            conn.exec_driver_sql("DROP TABLE admin_audit")

    report = _run(FakeKafka(during=drop), Audit(lambda: Session(database)))
    assert report.exit_code == exitcodes.OK and "aborted" in report.text
    assert "1 (the intent only: outcome not recorded)" in report.text
    assert report.warnings == ("txnwatch: done on Kafka (aborted), but the audit could not record the outcome (no "
                               "such table: admin_audit): audit row 1 holds the intent only; do not send it again",)


@dataclass
class FakeCoordinator:
    """Answers as a 4.1 coordinator for one ongoing transaction of ``payments-7`` (producer 9, epoch 4), or, when
    ``release`` is older, as txnwatch.kafka.terminate does there: a refusal before anything else is asked."""

    release: str = "4.1"
    calls: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, cluster: ClusterConfig, transactional_id: str, *, dry_run: bool) -> TerminateOutcome:
        self.calls.append(dict(transactional_id=transactional_id, dry_run=dry_run))
        if self.release < "4.1":
            return TerminateOutcome(transactional_id, dry_run, lowest_release=self.release, error=RequestError(
                "ApiVersions", "broker:1", None, UNSUPPORTED_RELEASE, refuse_release(self.release)))
        return TerminateOutcome(transactional_id, dry_run, coordinator_id=2, state="Ongoing", producer_id=9,
                                producer_epoch=4, partitions=(TopicPartition("payments", 1),),
                                lowest_release=self.release, started=not dry_run, aborted=not dry_run,
                                new_producer_id=None if dry_run else 9, new_producer_epoch=None if dry_run else 6)


def _unused(*args: Any, **kwargs: Any) -> AbortOutcome:
    raise AssertionError("the partition abort is not asked")


@pytest.mark.parametrize("execute", [False, True])
def test_by_transactional_id_under_the_same_audit(database: Any, execute: bool) -> None:
    coordinator = FakeCoordinator()
    report = abort_cli.run(CLUSTER, AbortById(CLUSTER.name, "payments-7"), execute=execute,
                           calls=AdminCalls(_unused, coordinator), audit=Audit(lambda: Session(database)), who=WHO,
                           now=lambda: NOW)
    assert report.exit_code == exitcodes.OK and report.warnings == ()
    assert coordinator.calls == [dict(transactional_id="payments-7", dry_run=not execute)]
    for shown in ("payments-7", "Ongoing", "id 9, epoch 4", "payments-1", "Kafka 4.1",
                  "aborted" if execute else "would abort"):
        assert shown in report.text, shown
    assert ("producer id 9, epoch 6" in report.text) is execute
    (row,) = _rows(database)
    assert (row.action, row.target, row.dry_run, row.outcome) == (
        "abort_transactional_id", {"transactional_id": "payments-7"}, not execute,
        "aborted" if execute else "would abort")


def test_by_transactional_id_on_a_cluster_older_than_41_names_the_partition_abort(database: Any) -> None:
    report = abort_cli.run(CLUSTER, AbortById(CLUSTER.name, "payments-7"), execute=True,
                           calls=AdminCalls(_unused, FakeCoordinator(release="3.9")),
                           audit=Audit(lambda: Session(database)), who=WHO, now=lambda: NOW)
    assert report.exit_code == exitcodes.FOUND_OR_FAILED
    assert "Kafka 3.9" in report.text and "--start-offset" in report.text
    (row,) = _rows(database)
    assert row.outcome is not None and row.outcome.startswith(f"{UNSUPPORTED_RELEASE}: the oldest broker runs Kafka 3.9")


@pytest.mark.parametrize(("args", "message"), [
    pytest.param(["--transactional-id", "x", "--topic", "t"], "names the transaction alone", id="id-and-topic"),
    pytest.param(["--transactional-id", "x", "--start-offset", "4"], "names the transaction alone",
                 id="id-and-offset"),
    pytest.param(["--transactional-id", ""], "1 to 32767 characters", id="empty-id"),
    pytest.param(["--start-offset", "4"], "give --topic and --partition (or --transactional-id)", id="no-partition"),
])
def test_by_id_usage_errors_are_one_line(args: list[str], message: str) -> None:
    result = CliRunner().invoke(cli.app, ["abort", "-b", "127.0.0.1:9", *args],
                                env={"TXNWATCH_CONFIG": "", "TXNWATCH_DATABASE_URL": ""})
    assert result.exit_code == exitcodes.USAGE and message in result.output, result.output


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
