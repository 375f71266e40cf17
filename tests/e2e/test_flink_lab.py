"""A real Flink job on the lab: Flink 2.2's KafkaSink (flink-connector-kafka 5.0.0-2.2, from Maven Central, compiled
at test time: tests/e2e/flink/FlinkSinkJob.java) writing exactly-once to Kafka 4.1.1, in a local mini-cluster.

Per naming strategy (INCREMENTING, the default: one id per checkpoint; POOLING: a few reused slots), with Kafka's
``kafka-transactions.sh list`` as the reference:

* every id of the sink that Kafka's tool lists, txnwatch names as the sink's (prefix, subtask, checkpoint or slot),
  the numbers as the id carries them, in the state the tool lists;
* a healthy job is never called lingering, on any poll, while its checkpoints commit (under POOLING a slot reopened
  for a later checkpoint is legitimately Ongoing while a higher slot commits: the false alarm the start-time rule
  exists to avoid);
* the job killed -9 mid-checkpoint leaves its open transactions Ongoing (the tool lists them), each named by
  subtask and checkpoint in the API.
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.daemon import start_daemon, wait_for
from tests.fixtures.lab_topics import module_topic
from txnwatch.core.frameworks import recognise
from txnwatch.lab.jars import classpath, require_tool, resolve_flink_jars
from txnwatch.lab.processes import spawn
from txnwatch.lab.reference import KafkaTransactionsTool
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS

pytestmark = [pytest.mark.lab, pytest.mark.slow]

JOB = Path(__file__).with_name("flink") / "FlinkSinkJob.java"
PARALLELISM = 2
CHECKPOINT_MS = 1_000


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the resolved jars, the compiled job's class directory)."""
    jars = resolve_flink_jars(quiet=True)
    classes = tmp_path_factory.mktemp("flink-job")
    subprocess.run([require_tool("javac"), "-d", str(classes), "-cp", classpath(jars), str(JOB)], check=True,
                   capture_output=True, timeout=180)
    return jars, classes


@pytest.fixture(scope="module")
def topic(kafka4_lab: Any) -> Iterator[str]:
    yield from module_topic(kafka4_lab, "flink", PARALLELISM)


@pytest.mark.parametrize("naming", ["INCREMENTING", "POOLING"])
def test_a_flink_sinks_ids_by_name_and_no_lingering_while_it_commits(
        naming: str, compiled: tuple[Path, Path], kafka4_lab: Any, topic: str, tmp_path: Path,
        sqlite_url: str) -> None:
    jars, classes = compiled
    bootstrap = kafka4_lab.bootstrap_servers
    prefix = f"flink-{naming.lower()}-{uuid.uuid4().hex[:6]}"
    cluster = prefix
    tool = KafkaTransactionsTool(bootstrap, kafka4_lab.kafka_version)
    daemon = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                          clusters=[dict(name=cluster, bootstrap_servers=bootstrap)])
    log = tmp_path / "flink.log"
    job = spawn([require_tool("java"), "-Xmx384m", "-XX:+UseSerialGC", "-cp", f"{classes}:{classpath(jars)}",
                 "FlinkSinkJob", bootstrap, topic, prefix, naming, str(CHECKPOINT_MS), str(PARALLELISM),
                 str(LAB_TRANSACTION_MAX_TIMEOUT_MS)], log, tmp_path, die_with_parent=True)

    def sink_ids() -> dict[str, str]:
        return {r["transactional_id"]: r["transaction_state"] for r in tool.list()
                if r["transactional_id"].startswith(f"{prefix}-")}

    lingering_seen: list[list[str]] = []

    def committed_twice_per_subtask() -> dict[str, str] | None:
        lingering_seen.append([i["transactional_id"] for i in daemon.items("/api/v1/lingering", cluster=cluster)])
        assert job.poll() is None, log.read_text()[-3000:]
        ids = sink_ids()
        done = [recognise(t) for t, state in ids.items() if state == "CompleteCommit"]
        per_subtask = {s: sum(1 for d in done if d is not None and d.subtask == s) for s in range(PARALLELISM)}
        return ids if min(per_subtask.values()) >= (2 if naming == "INCREMENTING" else 1) else None

    try:
        listed = wait_for(committed_twice_per_subtask, 120, interval=1, what=f"{prefix}'s checkpoints to commit")
        healthy_until = time.monotonic() + 8
        while time.monotonic() < healthy_until:  # a few more checkpoints, every poll watched
            lingering_seen.append([i["transactional_id"] for i in daemon.items("/api/v1/lingering",
                                                                          cluster=cluster)])
            time.sleep(0.5)
        assert not any(lingering_seen), f"a healthy {naming} sink was called lingering: {lingering_seen}"

        # Every id Kafka's tool listed is the sink's in txnwatch, numbers as the id carries them.
        def shown() -> dict[str, dict[str, Any]] | None:
            found = {t["transactional_id"]: t for t in daemon.items("/api/v1/transactions", cluster=cluster,
                                                              id_prefix=f"{prefix}-", limit=1000)}
            return found if set(listed) <= set(found) else None

        api = wait_for(shown, 10, what="the listed ids in the API")
        numbers = []
        for tid in listed:
            parts = re.fullmatch(rf"{re.escape(prefix)}-(\d+)-(\d+)", tid)
            assert parts is not None, tid
            subtask, checkpoint = int(parts[1]), int(parts[2])
            assert api[tid]["framework"] == {"framework": "flink_kafka_sink", "application": prefix, "process": None,
                                             "thread": None, "task": None, "subtask": subtask,
                                             "checkpoint": checkpoint}, api[tid]
            assert subtask < PARALLELISM
            numbers.append(checkpoint)
        if naming == "POOLING":  # a few slots from 0, reused
            assert min(numbers) == 0 and len(listed) <= PARALLELISM * 4, sorted(listed)
        else:  # one id per checkpoint, from checkpoint 1
            assert min(numbers) >= 1 and max(numbers) >= 2, sorted(listed)

        # Killed mid-checkpoint: its open transactions stay Ongoing (until their coordinator's timeout) and are
        # named by subtask and checkpoint.
        job.send_signal(signal.SIGKILL)
        job.wait(timeout=30)
        left = {t for t, state in sink_ids().items() if state == "Ongoing"}
        assert left, f"no open transaction left by the killed job: {sink_ids()}"

        def named_ongoing() -> bool:
            found = {t["transactional_id"]: t for t in daemon.items("/api/v1/transactions", cluster=cluster,
                                                              id_prefix=f"{prefix}-", state="Ongoing")}
            return left <= set(found) and all(found[t]["framework"]["application"] == prefix for t in left)

        wait_for(named_ongoing, 10, what="the killed job's open transactions in the API")
    finally:
        if job.poll() is None:
            job.kill()
            job.wait(timeout=30)
        daemon.stop()
