"""The abort by transactional id on Kafka 4.1.1 (transaction.version 2), through the CLI and through the API.

A real producer (kafka-python's transactional producer, txnwatch.lab.faults.start_lso_stall) begins a
transaction, writes three records and goes silent: its id is Ongoing at the coordinator and the partition's LSO
stays at its first record.  ``txnwatch abort --transactional-id X --execute`` and ``POST
/api/v1/admin/abort-by-id`` (a real uvicorn) end it as Kafka 4.1's ``forceTerminateTransaction`` does.  Kafka's
own ``kafka-transactions.sh describe`` is the reference for the id afterwards (no longer Ongoing, its epoch
bumped by the abort), the broker's read_committed ListOffsets for the partition (the LSO reaches the high
watermark); each execute's audit row is read while Kafka is being asked: committed, its outcome still empty.

The transaction's timeout is the lab's maximum (15 s): each abort runs within a second of its transaction's
start, and asserts that txnwatch's call, not the coordinator's timeout, ended it (InitProducerId's new epoch is
the one Kafka's tool then describes).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tests.fixtures.daemon import wait_for
from tests.fixtures.guarded import ADMIN, serving
from tests.fixtures.lab_topics import module_topic
from tests.fixtures.migrated import migrate
from tests.lab.helpers import offsets
from txnwatch.cli import commands as cli
from txnwatch.core import exitcodes
from txnwatch.lab.faults import LsoStallFault, start_lso_stall
from txnwatch.lab.reference import KafkaTransactionsTool
from txnwatch.remedy.commands import AdminCalls
from txnwatch.runtime import wiring
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.store.db import make_engine

pytestmark = pytest.mark.lab

AUTH = {"Authorization": f"Bearer {ADMIN}"}


@pytest.fixture(scope="module")
def topic(kafka4_lab: Any) -> Iterator[str]:
    yield from module_topic(kafka4_lab, "abort-by-id", 2)


@pytest.fixture
def kafka(kafka4_lab: Any) -> Iterator[Any]:
    admin = kafka4_lab.admin()
    try:
        yield admin
    finally:
        admin.close()


def audit_rows(url: str) -> list[dict[str, Any]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT id, actor, action, dry_run, outcome, target FROM admin_audit "
                                      "ORDER BY id")).mappings().all()
    finally:
        engine.dispose()
    return [dict(row) for row in found]


def audited_ahead(url: str, seen: list[list[tuple[str, Any]]], real: Callable[..., Any]) -> Callable[..., Any]:
    """The real Kafka call, after reading the audit table from another connection (what it holds meanwhile)."""
    def call(*args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("dry_run", True):
            seen.append([(r["action"], r["outcome"]) for r in audit_rows(url)])
        return real(*args, **kwargs)
    return call


def ongoing(kafka: Any, fault: LsoStallFault) -> None:
    lso, hwm = offsets(kafka, fault.topic, fault.partition)
    assert lso == fault.first_offset < hwm, (lso, hwm)


def ended_by_us(kafka: Any, tool: KafkaTransactionsTool, fault: LsoStallFault, new_epoch: int) -> None:
    """Kafka's tool: the id is no longer Ongoing, at the epoch txnwatch's call was answered; the LSO moved on."""
    described = tool.describe(fault.transactional_id)
    assert described["transaction_state"] in ("Empty", "CompleteAbort"), described
    assert described["producer_epoch"] == new_epoch > fault.producer_epoch, described
    assert described["topic_partitions"] == [], described
    wait_for(lambda: (o := offsets(kafka, fault.topic, fault.partition))[0] == o[1], 30,
             what="the LSO to reach the high watermark")


def test_the_cli_and_the_api_abort_by_transactional_id(tmp_path: Path, kafka4_lab: Any, topic: str, kafka: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'tw.db'}"
    migrate(url)
    tool = KafkaTransactionsTool(kafka4_lab.bootstrap_servers, kafka4_lab.kafka_version)
    seen: list[list[tuple[str, Any]]] = []
    calls = wiring.ADMIN_CALLS
    monkeypatch.setattr(wiring, "ADMIN_CALLS", AdminCalls(calls.abort_transaction,
                                                          audited_ahead(url, seen, calls.terminate_transaction)))

    by_cli = start_lso_stall(kafka4_lab.bootstrap_servers, topic, 0, transaction_timeout_ms=kafka4_lab.transaction_max_timeout_ms)
    try:
        ongoing(kafka, by_cli)
        result = CliRunner().invoke(cli.app, ["abort", "--bootstrap-server", kafka4_lab.bootstrap_servers,
                                              "--transactional-id", by_cli.transactional_id, "--execute"],
                                    env={"TXNWATCH_CONFIG": "", "TXNWATCH_DATABASE_URL": url})
        assert result.exit_code == exitcodes.OK, result.output
        for shown in ("Ongoing", f"{topic}-0", "Kafka 4.1", "aborted"):
            assert shown in result.output, (shown, result.output)
        new_epoch = int(result.output.split("producer id ")[1].split("epoch ")[1].split()[0])
        ended_by_us(kafka, tool, by_cli, new_epoch)
    finally:
        by_cli.clear()

    def reading_audit(runtime: Runtime) -> Runtime:
        real = runtime.admin_calls
        return dataclasses.replace(runtime, admin_calls=AdminCalls(
            real.abort_transaction, audited_ahead(url, seen, real.terminate_transaction)))

    by_api = start_lso_stall(kafka4_lab.bootstrap_servers, topic, 1, transaction_timeout_ms=kafka4_lab.transaction_max_timeout_ms)
    try:
        with serving(tmp_path, url=url, clusters=[{"name": "k4", "bootstrap_servers": kafka4_lab.bootstrap_servers}],
                     runtime_with=reading_audit) as (base, _, _), httpx.Client(base_url=base, timeout=60) as http:
            body = {"cluster": "k4", "transactional_id": by_api.transactional_id}
            dry = http.post("/api/v1/admin/abort-by-id", json={**body, "dry_run": True}, headers=AUTH)
            assert dry.status_code == 200, dry.text
            assert {k: dry.json()[k] for k in ("state", "partitions", "lowest_release", "outcome", "aborted")} == {
                "state": "Ongoing", "partitions": [f"{topic}-1"], "lowest_release": "4.1", "outcome": "would abort",
                "aborted": False}
            ongoing(kafka, by_api)
            done = http.post("/api/v1/admin/abort-by-id", json={**body, "dry_run": False}, headers=AUTH)
            assert done.status_code == 200, done.text
            assert (done.json()["aborted"], done.json()["outcome_recorded"]) == (True, True), done.text
            ended_by_us(kafka, tool, by_api, done.json()["new_producer_epoch"])
            again = http.post("/api/v1/admin/abort-by-id", json={**body, "dry_run": False}, headers=AUTH)
            assert again.status_code == 409 and "no ongoing transaction" in again.json()["detail"], again.text
    finally:
        by_api.clear()

    rows = audit_rows(url)
    assert [(r["actor"], r["action"], bool(r["dry_run"]), (r["outcome"] or "").split(":")[0]) for r in rows] == [
        ("cli:bootstrap-server", "abort_transactional_id", False, "aborted"),
        ("api:admin-token", "abort_transactional_id", True, "would abort"),
        ("api:admin-token", "abort_transactional_id", False, "aborted"),
        ("api:admin-token", "abort_transactional_id", False, "NO_ONGOING_TRANSACTION")]
    # While Kafka was asked, each execute's intent was committed with no outcome yet.
    assert seen[0] == [("abort_transactional_id", None)]
    assert seen[1] == [("abort_transactional_id", "aborted"), ("abort_transactional_id", "would abort"),
                       ("abort_transactional_id", None)]


def test_the_poll_reads_the_labs_release_and_transaction_version(kafka4_lab: Any) -> None:
    """What the refusal, the console's command choice and the hazards read: Kafka 4.1.1 with TV2 finalized, as
    Kafka's own kafka-features describes it, is line 4.1 with transaction.version 2 (KAFKA-20310, KAFKA-20090)."""
    from txnwatch.core.config import ClusterConfig
    from txnwatch.core.hazards import cluster_hazards
    from txnwatch.core.vocabulary import KnownHazard
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    config = ClusterConfig(name="k4", bootstrap_servers=kafka4_lab.bootstrap_servers)
    with ClusterConnection(ClusterConnectionSettings.from_config(config)) as connection:
        snapshot = connection.poll()
    assert [(r.release, r.newest_known, r.transaction_version) for r in snapshot.broker_releases] == [
        ((4, 1), False, 2)]
    assert [e for e in snapshot.errors if e.api == "ApiVersions"] == []
    assert cluster_hazards(snapshot.broker_releases) == (KnownHazard.KAFKA_20310, KnownHazard.KAFKA_20090)
