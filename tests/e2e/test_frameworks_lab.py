"""The frameworks by name on a real lab (Kafka 4.1.1, transaction version 2), with Kafka's own tool as the reference.

Kafka's Java transactional producer (ProducerPerformance) writes under ids of the frameworks' shapes: a Kafka
Streams exactly_once_v2 thread (``<application.id>-<process UUID>-1``) and a Flink KafkaSink subtask's next
checkpoint (``<prefix>-0-8``), each committing.  The sink's checkpoint 7 (``<prefix>-0-7``) is what a Flink job
that died mid-checkpoint leaves: a transaction opened, written to and never ended (a kafka-python producer that
goes silent, txnwatch.lab.faults.start_lso_stall, opened just before the Java producer of checkpoint 8 began: the
JVM takes over a second to start, and the test checks the order with Kafka's tool).

Then, against ``kafka-transactions.sh list`` and ``describe``:

* the API names every id of the run by framework, application, thread or subtask and checkpoint, in the state
  Kafka's tool lists it, and /metrics counts them per application;
* ``GET /api/v1/lingering`` finds checkpoint 7 superseded by checkpoint 8 (Kafka's tool: 7 Ongoing, started
  before 8, which is CompleteCommit), and hands out the abort by transactional id, which run as printed ends it
  (Kafka's tool: no longer Ongoing, at a bumped epoch) and the finding with it.

The coordinator would abort checkpoint 7 at its timeout (the Kafka 4 lab's maximum, 60 s: the test's steps start
several JVMs, which on a loaded machine took longer than 15 s); txnwatch must find it and its abort must end it
before then, which the bumped epoch Kafka's tool describes proves was txnwatch's doing.
"""

from __future__ import annotations

import shlex
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from tests.fixtures.lab_topics import module_topic
from txnwatch.cli import commands as cli
from txnwatch.core import exitcodes
from txnwatch.lab.faults import start_lso_stall
from txnwatch.lab.java_clients import JavaProducerSpec, start_java_producer
from txnwatch.lab.reference import KafkaTransactionsTool

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module")
def topic(kafka4_lab: Any) -> Iterator[str]:
    yield from module_topic(kafka4_lab, "frameworks", 2)


def _ms(value: str) -> int:
    return round(datetime.fromisoformat(value).timestamp() * 1000)


def _metric(d: Daemon, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(d.get("/metrics").text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


def test_streams_and_flink_ids_by_name_and_a_lingering_checkpoint_ended_by_id(
        kafka4_lab: Any, topic: str, tmp_path: Path, sqlite_url: str) -> None:
    run = uuid.uuid4().hex[:6]
    cluster, app, prefix = f"fw-{run}", f"wordcount-{run}", f"orders-sink-{run}"
    process = str(uuid.uuid4())
    streams_id, lingering_id, next_id = f"{app}-{process}-1", f"{prefix}-0-7", f"{prefix}-0-8"
    bootstrap = kafka4_lab.bootstrap_servers
    tool = KafkaTransactionsTool(bootstrap, kafka4_lab.kafka_version)
    daemon = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                          clusters=[dict(name=cluster, bootstrap_servers=bootstrap)])
    streams = start_java_producer(bootstrap, JavaProducerSpec(streams_id, topic, duration_s=60), tmp_path,
                                  kafka_version=kafka4_lab.kafka_version)
    left = None
    try:
        streams.wait_for_output("records sent", 60)  # warm: it commits every 500 ms from here on
        # Checkpoint 8's JVM starts first but takes over a second before its first transaction; checkpoint 7's
        # transaction is open within a few hundred ms: the order Flink leaves them in (checked below).
        nxt = start_java_producer(bootstrap, JavaProducerSpec(next_id, topic, duration_s=1, records_per_second=10),
                                  tmp_path, kafka_version=kafka4_lab.kafka_version)
        left = start_lso_stall(bootstrap, topic, 1, transaction_timeout_ms=kafka4_lab.transaction_max_timeout_ms,
                               transactional_id=lingering_id)
        assert nxt.wait(30) == 0, nxt.output()[-2000:]

        found = wait_for(lambda: [i for i in daemon.items("/api/v1/lingering", cluster=cluster)
                                  if i["transactional_id"] == lingering_id], 10, interval=0.3,
                         what=f"{lingering_id} lingering")
        (item,) = found
        listed = {row["transactional_id"]: row for row in tool.list()}
        described = tool.describe(lingering_id)
        described_next = tool.describe(next_id)
        # Kafka's tool: 7 still Ongoing and started before 8, which committed.
        assert listed[lingering_id]["transaction_state"] == "Ongoing" == described["transaction_state"]
        assert listed[next_id]["transaction_state"] == "CompleteCommit"
        started = int(described["current_transaction_start_time_ms"])
        assert started == _ms(item["txn_started_at"])
        if str(described_next.get("current_transaction_start_time_ms")) not in ("None", "-1", ""):
            assert int(described_next["current_transaction_start_time_ms"]) > started
        assert (item["reason"], item["superseded_by"], item["superseded_checkpoint"]) == ("superseded", next_id, 8)
        assert (item["prefix"], item["subtask"], item["checkpoint"]) == (prefix, 0, 7)
        assert item["partitions"] == [f"{topic}-1"] and item["producer_id"] == int(described["producer_id"])

        # Every id of the run, named as its framework names it, in the state Kafka's tool lists it.
        shown = {t["transactional_id"]: t for t in daemon.items("/api/v1/transactions", cluster=cluster,
                                                          limit=1000)}
        ours = {tid for tid in listed if run in tid}
        assert ours == {streams_id, lingering_id, next_id} <= set(shown)
        assert shown[streams_id]["framework"] == {"framework": "kafka_streams_eos_v2", "application": app,
                                                  "process": process, "thread": 1, "task": None, "subtask": None,
                                                  "checkpoint": None}
        for tid, checkpoint in ((lingering_id, 7), (next_id, 8)):
            assert shown[tid]["framework"] == {"framework": "flink_kafka_sink", "application": prefix,
                                               "process": None, "thread": None, "task": None, "subtask": 0,
                                               "checkpoint": checkpoint}
        assert shown[lingering_id]["state"] == listed[lingering_id]["transaction_state"]
        assert _metric(daemon, "txnwatch_framework_transactional_ids", cluster=cluster,
                       framework="flink_kafka_sink", application=prefix) == 2
        assert _metric(daemon, "txnwatch_framework_transactional_ids", cluster=cluster,
                       framework="kafka_streams_eos_v2", application=app) == 1
        assert _metric(daemon, "txnwatch_flink_lingering_transactions", cluster=cluster, reason="superseded") == 1

        # The command it hands out, run as printed, ends it before the coordinator's timeout would.
        words = shlex.split(item["abort_by_id_command"])
        assert words[-3:] == ["--transactional-id", lingering_id, "--execute"], words
        result = CliRunner().invoke(cli.app, words[words.index("abort"):],
                                    env={"TXNWATCH_CONFIG": "", "TXNWATCH_DATABASE_URL": sqlite_url})
        assert result.exit_code == exitcodes.OK, result.output
        after = tool.describe(lingering_id)
        assert after["transaction_state"] in ("Empty", "CompleteAbort"), after
        assert int(after["producer_epoch"]) > int(described["producer_epoch"]), (after, described)
        wait_for(lambda: not [i for i in daemon.items("/api/v1/lingering", cluster=cluster)
                              if i["transactional_id"] == lingering_id], 10, interval=0.3,
                 what="the lingering finding to end with its transaction")
    finally:
        if left is not None:
            left.clear()
        streams.stop()
        daemon.stop()
