"""The admin abort's audit is written ahead, on a real lab partition with an open transaction (issue 38 item 4).

Before: the API called WriteTxnMarkers first and wrote the audit row after.  With the store's volume full the
ABORT marker was written (the LSO moved), no row existed and the answer was ``503 database unreachable; retry
shortly``, so the operator aborted again; a successful abort's row named no client address.  Here a hanging
transaction pins a partition's LSO (txnwatch.lab.faults.inject_hanging_transaction) and a real uvicorn serves the
API with the daemon's proxy options (127.0.0.1, the test, is a trusted proxy by default); the store is SQLite on
a tmpfs the test fills to the last byte, or PostgreSQL behind a TCP proxy the test cuts.  Whether anything
reached the partition is Kafka's to say: the broker's read_committed ListOffsets (the LSO) and Kafka's own
``kafka-transactions.sh describe-producers`` (the transaction still open at its first offset, or not).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from typer.testing import CliRunner

from tests.fixtures.daemon import wait_for
from tests.fixtures.db_proxy import DbProxy, db_proxy
from tests.fixtures.guarded import ADMIN, serving
from tests.fixtures.migrated import migrate
from tests.fixtures.postgres_server import PostgresServer
from tests.fixtures.volumes import Volume, tmpfs_volume
from tests.lab.helpers import offsets
from txnwatch.cli import commands as cli
from txnwatch.core import exitcodes
from txnwatch.lab.faults import HangingTxn, inject_hanging_transaction
from txnwatch.lab.reference import KafkaTransactionsTool
from txnwatch.lab.topics import create_topic, delete_topics_quietly, unique_topic_name
from txnwatch.remedy.commands import AdminCalls
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.store.db import make_engine

pytestmark = pytest.mark.lab

AUTH = {"Authorization": f"Bearer {ADMIN}"}
BEHIND_PROXY = {**AUTH, "X-Forwarded-For": "203.0.113.7"}
NOTHING_SENT = "nothing was sent to Kafka: the audit could not record the intent ("
SAFE_TO_RETRY = "); it is safe to retry once the database accepts writes"


@pytest.fixture(scope="module")
def topic(lab_cluster: Any) -> Iterator[str]:
    """One partition per test: each gets a hanging transaction of its own."""
    admin = lab_cluster.admin()
    name = unique_topic_name("abort-audit")
    create_topic(admin, name, 5, min(3, len(lab_cluster.brokers)))
    try:
        yield name
    finally:
        delete_topics_quietly(admin, [name])
        admin.close()


@pytest.fixture
def kafka(lab_cluster: Any) -> Iterator[Any]:
    admin = lab_cluster.admin()
    try:
        yield admin
    finally:
        admin.close()


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Volume]:
    with tmpfs_volume(tmp_path / "volume") as mounted:
        try:
            yield mounted
        finally:
            mounted.free()


@pytest.fixture
def sqlite_on_volume(volume: Volume) -> str:
    url = f"sqlite:///{volume.path / 'txnwatch.db'}"
    migrate(url)
    return url


@contextmanager
def hanging(lab_cluster: Any, topic: str, partition: int) -> Iterator[HangingTxn]:
    fault = inject_hanging_transaction(lab_cluster.bootstrap_servers, topic, partition)
    try:
        yield fault
    finally:
        fault.clear()  # aborts it with kafka-python's admin if a test left it open


def abort_body(fault: HangingTxn, *, dry_run: bool) -> dict[str, Any]:
    return {"cluster": "lab", "topic": fault.topic, "partition": fault.partition, "producer_id": fault.producer_id,
            "producer_epoch": fault.producer_epoch, "dry_run": dry_run}


def still_open(kafka: Any, tool: KafkaTransactionsTool, fault: HangingTxn) -> None:
    """Nothing reached the partition: its LSO is where the transaction pins it, and Kafka lists it open there."""
    lso, hwm = offsets(kafka, fault.topic, fault.partition)
    assert lso == fault.first_offset < hwm, (lso, hwm)
    producers = tool.describe_producers(fault.topic, fault.partition)
    assert [p["current_transaction_start_offset"] for p in producers if p["producer_id"] == fault.producer_id] == [
        fault.first_offset]


def ended(kafka: Any, fault: HangingTxn) -> None:
    """The ABORT marker is written: the LSO reaches the high watermark (the broker's read_committed answer)."""
    wait_for(lambda: (o := offsets(kafka, fault.topic, fault.partition))[0] == o[1], 30,
             what="the LSO to reach the high watermark")


def audit_rows(url: str) -> list[dict[str, Any]]:
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT id, actor, client, dry_run, outcome, at, finished_at, target "
                                      "FROM admin_audit ORDER BY id")).mappings().all()
    finally:
        engine.dispose()
    return [dict(row) for row in found]


def lab_cluster_config(lab_cluster: Any) -> list[dict[str, Any]]:
    return [{"name": "lab", "bootstrap_servers": lab_cluster.bootstrap_servers}]


def cli_abort(lab_cluster: Any, fault: HangingTxn, database_url: str) -> Any:
    """`txnwatch abort --bootstrap-server … --execute` as the console prints it, with a database configured."""
    return CliRunner().invoke(cli.app, ["abort", "--bootstrap-server", lab_cluster.bootstrap_servers, "--topic",
                                        fault.topic, "--partition", str(fault.partition), "--start-offset",
                                        str(fault.first_offset), "--execute"],
                              env={"TXNWATCH_CONFIG": "", "TXNWATCH_DATABASE_URL": database_url})


@pytest.fixture
def postgres_behind_a_proxy(postgres_server: PostgresServer, postgres_url: str) -> Iterator[tuple[str, DbProxy]]:
    """A migrated PostgreSQL database reached through one proxy route, which the test can cut (the database down)."""
    migrate(postgres_url)
    with db_proxy(postgres_server.port, 1) as proxy:
        yield proxy.url(postgres_url, 0), proxy


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_abort_is_audited_with_its_client_direct_and_behind_a_trusted_proxy(
        tmp_path: Path, lab_cluster: Any, topic: str, kafka: Any, request: pytest.FixtureRequest,
        backend: str) -> None:
    url = request.getfixturevalue("postgres_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'tw.db'}"
    migrate(url)
    with hanging(lab_cluster, topic, 0 if backend == "sqlite" else 1) as fault, \
            serving(tmp_path, url=url, clusters=lab_cluster_config(lab_cluster)) as (base, _, _), \
            httpx.Client(base_url=base, timeout=60) as http:
        dry = http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=True), headers=AUTH)
        assert dry.status_code == 200 and dry.json()["outcome"] == "would abort", dry.text
        done = http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=False), headers=BEHIND_PROXY)
        assert done.status_code == 200, done.text
        assert (done.json()["aborted"], done.json()["outcome_recorded"], done.json()["audit_warning"]) == (
            True, True, None)
        ended(kafka, fault)
    rows = audit_rows(url)
    assert [(r["actor"], r["client"], bool(r["dry_run"]), r["outcome"]) for r in rows] == [
        ("api:admin-token", "127.0.0.1", True, "would abort"),
        ("api:admin-token", "203.0.113.7", False, "aborted")]
    assert [r["id"] for r in rows] == [dry.json()["audit_id"], done.json()["audit_id"]]
    assert all(r["finished_at"] is not None and r["finished_at"] >= r["at"] for r in rows)


def test_the_database_down_sends_nothing(tmp_path: Path, lab_cluster: Any, topic: str, kafka: Any,
                                         kafka_transactions: KafkaTransactionsTool,
                                         postgres_behind_a_proxy: tuple[str, DbProxy]) -> None:
    """PostgreSQL cut off after a first, audited dry run: the API and the CLI say nothing was sent, and it was not."""
    url, proxy = postgres_behind_a_proxy
    with hanging(lab_cluster, topic, 2) as fault, \
            serving(tmp_path, url=url, clusters=lab_cluster_config(lab_cluster)) as (base, _, _), \
            httpx.Client(base_url=base, timeout=60) as http:
        assert http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=True), headers=AUTH).status_code == 200
        proxy.cut(0)
        refused = http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=False), headers=AUTH)
        command_line = cli_abort(lab_cluster, fault, url)
        still_open(kafka, kafka_transactions, fault)
        assert refused.status_code == 503 and refused.headers["retry-after"], refused.text
        detail = refused.json()["detail"]
        assert detail.startswith(NOTHING_SENT) and detail.endswith(SAFE_TO_RETRY), detail
        assert command_line.exit_code == exitcodes.NOT_AUDITED, command_line.output
        (line,) = command_line.output.splitlines()
        assert line.startswith("txnwatch: " + NOTHING_SENT) and line.endswith(SAFE_TO_RETRY), line
        proxy.restore(0)
        assert [(r["dry_run"], r["outcome"]) for r in audit_rows(url)] == [(True, "would abort")]


def test_a_full_volume_sends_nothing(tmp_path: Path, lab_cluster: Any, topic: str, kafka: Any,
                                     kafka_transactions: KafkaTransactionsTool, volume: Volume,
                                     sqlite_on_volume: str) -> None:
    """SQLite's volume full after a first, audited dry run: the answer is ``database or disk is full``, nothing
    was sent (issue 38's case: the marker used to be written, LSO 0 -> 7, and the answer said to retry)."""
    with hanging(lab_cluster, topic, 3) as fault, \
            serving(tmp_path, url=sqlite_on_volume, clusters=lab_cluster_config(lab_cluster)) as (base, _, _), \
            httpx.Client(base_url=base, timeout=60) as http:
        assert http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=True), headers=AUTH).status_code == 200
        volume.fill()
        refused = http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=False), headers=AUTH)
        command_line = cli_abort(lab_cluster, fault, sqlite_on_volume)
        still_open(kafka, kafka_transactions, fault)
        assert refused.status_code == 503, refused.text
        assert refused.json()["detail"] == f"{NOTHING_SENT}database or disk is full{SAFE_TO_RETRY}"
        assert command_line.exit_code == exitcodes.NOT_AUDITED, command_line.output
        assert command_line.output == f"txnwatch: {NOTHING_SENT}database or disk is full{SAFE_TO_RETRY}\n"
        assert [(r["dry_run"], r["outcome"]) for r in audit_rows(sqlite_on_volume)] == [(True, "would abort")]


def test_an_outcome_the_full_volume_refuses_says_the_abort_happened(
        tmp_path: Path, lab_cluster: Any, topic: str, kafka: Any, volume: Volume, sqlite_on_volume: str) -> None:
    """The volume fills while Kafka writes the marker: the abort stands, 200, and the answer says the outcome is
    not recorded and not to send it again; the row holds the intent, with its client."""
    def filling_after(runtime: Runtime) -> Runtime:
        real = runtime.admin_calls.abort_transaction

        def abort_then_fill(*args: Any, **kwargs: Any) -> Any:
            try:
                return real(*args, **kwargs)
            finally:
                volume.fill()

        return dataclasses.replace(runtime, admin_calls=AdminCalls(abort_then_fill))

    with hanging(lab_cluster, topic, 4) as fault, \
            serving(tmp_path, url=sqlite_on_volume, clusters=lab_cluster_config(lab_cluster),
                    runtime_with=filling_after) as (base, _, _), \
            httpx.Client(base_url=base, timeout=60) as http:
        done = http.post("/api/v1/admin/abort", json=abort_body(fault, dry_run=False), headers=BEHIND_PROXY)
        assert done.status_code == 200, done.text
        answer = done.json()
        assert (answer["aborted"], answer["outcome"], answer["outcome_recorded"]) == (True, "aborted", False)
        assert answer["audit_warning"] == (
            "done on Kafka (aborted), but the audit could not record the outcome (database or disk is full): "
            f"audit row {answer['audit_id']} holds the intent only; do not send it again")
        ended(kafka, fault)
    (row,) = audit_rows(sqlite_on_volume)
    assert (row["id"], row["actor"], row["client"], row["outcome"], row["finished_at"]) == (
        answer["audit_id"], "api:admin-token", "203.0.113.7", None, None)
    assert json.loads(row["target"])["producer_id"] == fault.producer_id
