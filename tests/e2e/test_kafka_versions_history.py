"""What Kafka users run, measured against Kafka's own reading of the coordinator log.

Per Kafka line — 4.1.1 on its defaults (verification on, transaction version 2 finalized), 3.9.1 (transaction
version 1) and 4.4.0, the newest line Maven Central serves — one broker runs the Prometheus JMX exporter, and:

1. healthy: Kafka's own Java transactional producer (ProducerPerformance) commits about twice a second, a
   kafka-python producer commits and aborts beside it.  Nothing may be called hanging, stalled or fenced, and
   no alert may start, although under transaction version 2 every commit bumps the epoch;
2. a second Java instance with the same transactional id fences the first.

Then txnwatch's exact counters (commits, aborts, epoch bumps, fences, timeout aborts, producer id changes,
records) must equal what `DumpLogSegments --transaction-log-decoder` reads from the broker's
`__transaction_state` segment files (txnwatch.lab.dumplog), the Java id's timeline must list every record with
its exact time, and the brokers' verification figures txnwatch shows must be the brokers' own.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.lab.dumplog import Totals, coordinator_log, histories
from txnwatch.lab.faults import transactional_producer
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION, OLDER_KAFKA_VERSION, kafka_major
from txnwatch.lab.java_clients import JavaProducerSpec, start_java_producer
from txnwatch.lab.topics import create_topic, unique_topic_name

pytestmark = [pytest.mark.lab, pytest.mark.slow]

#: (version, seconds of healthy Java traffic before the fence): the newest line gets a shorter run.
VERSIONS = [pytest.param((DEFAULT_KAFKA_VERSION, 8), id=f"{DEFAULT_KAFKA_VERSION}-tv2"),
            pytest.param((OLDER_KAFKA_VERSION, 8), id=f"{OLDER_KAFKA_VERSION}-tv1"),
            pytest.param((NEWEST_KAFKA_VERSION, 5), id=f"{NEWEST_KAFKA_VERSION}-newest")]
#: txnwatch counter -> the reference's Totals field.
COUNTERS = {"txnwatch_transaction_commits_total": "commits", "txnwatch_transaction_aborts_total": "aborts",
            "txnwatch_producer_epoch_bumps_total": "epoch_bumps", "txnwatch_producer_fencings_total": "fences",
            "txnwatch_transaction_timeout_aborts_total": "timeout_aborts",
            "txnwatch_producer_id_changes_total": "producer_id_changes"}


@pytest.fixture(scope="module", params=VERSIONS)
def versioned(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, int]]:
    """One 1-broker lab per Kafka line on Kafka's defaults with the JMX exporter, one at a time.  The session's
    `kafka4_lab` serves its own version."""
    version, healthy_s = request.param
    if os.environ.get("TXNWATCH_LAB_KAFKA_VERSION", DEFAULT_KAFKA_VERSION) == version:
        yield request.getfixturevalue("kafka4_lab"), healthy_s
        return
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

    lab = start_lab(LabSettings(brokers=1, kafka_version=version, combined=True, proxy=False, jmx_exporter=True,
                                transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS)),
                    tmp_path_factory.mktemp(f"txnwatch-lab-{version}"), die_with_parent=True)
    try:
        yield lab, healthy_s
    finally:
        lab.down()


def _metrics(d: Daemon, cluster: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset((k, v) for k, v in s.labels.items() if k != "cluster")): s.value
            for family in text_string_to_metric_families(d.get("/metrics").text) for s in family.samples
            if s.labels.get("cluster") == cluster}


def _counter(values: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    return values.get((name, frozenset(labels.items())))


def _items(d: Daemon, path: str, cluster: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = d.get(path, params={"cluster": cluster}).json()["items"]
    return items


def _ms(value: str) -> int:
    return round(datetime.fromisoformat(value).timestamp() * 1000)


def test_exact_history_equals_the_coordinator_log(versioned: tuple[Any, int], tmp_path: Path,
                                                  sqlite_url: str) -> None:
    lab, healthy_s = versioned
    version = lab.kafka_version
    (log,) = Path(lab.lab_dir).glob("node-*/server.log")
    assert f"Kafka version: {version}" in log.read_text()  # what the broker runs, not what was asked
    cluster = f"k{version.replace('.', '')}-{uuid.uuid4().hex[:4]}"
    topic = unique_topic_name("history")
    admin = lab.admin()
    try:
        create_topic(admin, topic, 2, 1)
    finally:
        admin.close()
    urls = {str(k): v for k, v in lab.broker_metrics_urls().items()}
    daemon = start_daemon(
        database_url=sqlite_url, poll_interval_seconds=2,
        clusters=[dict(name=cluster, bootstrap_servers=lab.bootstrap_servers, broker_metrics_urls=urls)],
        detection=dict(lso_stall_seconds=10, prepare_stuck_seconds=10, verification_grace_seconds=10),
        alert_rules=dict(hanging_transaction=dict(for_seconds=0), lso_stall=dict(for_seconds=0),
                         prepare_stuck=dict(for_seconds=0)))
    java_id, python_id = f"java-{cluster}", f"python-{cluster}"
    producers = []
    try:
        wait_for(lambda: _counter(_metrics(daemon, cluster), "txnwatch_history_mode", mode="exact") == 1, 60,
                 what="exact history mode")
        # 1. Healthy: a Java transactional producer committing every 500 ms, a kafka-python one beside it.
        first = start_java_producer(lab.bootstrap_servers, JavaProducerSpec(java_id, topic, duration_s=90),
                                    tmp_path, kafka_version=version)
        producers.append(first)
        python = transactional_producer(lab.bootstrap_servers, python_id, 10_000)
        try:
            for i in range(6):
                python.begin_transaction()
                python.send(topic, b"v", partition=1)
                python.flush()
                if i % 3 == 0:
                    python.abort_transaction()
                else:
                    python.commit_transaction()
        finally:
            python.close(timeout=5)
        wait_for(lambda: _history(daemon, cluster, java_id)["commits"] >= 2 * healthy_s - 4, healthy_s + 60,
                 interval=1, what=f"~{healthy_s} s of Java commits")
        healthy = histories(coordinator_log(lab))
        # No false alarm: the coordinator log shows no fence, and txnwatch says nothing is wrong.
        assert healthy[java_id].fences == 0 and healthy[java_id].aborts == 0
        if kafka_major(version) >= 4:  # transaction version 2: every commit bumped the epoch, and that is fine
            assert healthy[java_id].epoch_bumps >= healthy[java_id].commits > 0
        wait_for(lambda: _history(daemon, cluster, java_id)["commits"] >= healthy[java_id].commits, 60,
                 what="txnwatch to read the healthy phase")
        assert _history(daemon, cluster, java_id)["fences"] == 0
        assert _counter(_metrics(daemon, cluster), "txnwatch_producer_fencings_total") == Totals.of(healthy).fences
        assert _items(daemon, "/api/v1/hanging", cluster) == []
        assert _items(daemon, "/api/v1/lso-stalls", cluster) == []
        assert _items(daemon, "/api/v1/alerts", cluster) == []

        # 2. A second instance with the same transactional id fences the first.  The first has a transaction
        # open ~90 % of the time; if the second's InitProducerId lands in the gap between two of its
        # transactions, the coordinator only bumps the epoch (no transaction to abort, so no fence in the log,
        # and txnwatch must not count one either) and the first dies at its next write all the same.  Then
        # the first is started again and fenced again, up to three times.  Rarely the first wins the id back
        # (its client recovers the aborted transaction with an InitProducerId of its own) and fences the second:
        # then the next attempt's second fences the first, and the log holds one fence more, which txnwatch must
        # count all the same.
        won_back = 0  # attempts whose second instance the first fenced
        for attempt in range(3):
            second = start_java_producer(lab.bootstrap_servers, JavaProducerSpec(java_id, topic, duration_s=2),
                                         tmp_path, kafka_version=version)
            producers.append(second)
            code = second.wait(90)
            if code != 0 and second.fenced and first.running() and attempt < 2:
                won_back += 1
                continue
            assert code == 0, second.output()[-2000:]
            assert first.wait(60) != 0 and first.fenced, first.output()[-2000:]
            records = coordinator_log(lab)
            if histories(records)[java_id].fences or attempt == 2:
                break
            committed = _history(daemon, cluster, java_id)["commits"]
            first = start_java_producer(lab.bootstrap_servers, JavaProducerSpec(java_id, topic, duration_s=90),
                                        tmp_path, kafka_version=version)
            producers.append(first)
            wait_for(partial(lambda before: _history(daemon, cluster, java_id)["commits"] > before, committed), 60,
                     what="the restarted first instance to commit")

        # Quiescent now: txnwatch's counters equal the coordinator log, read by Kafka's own DumpLogSegments.
        def compare(records: list[Any]) -> tuple[dict[str, float | None], dict[str, int]]:
            totals = Totals.of(histories(records))
            expected = {name: getattr(totals, field) for name, field in COUNTERS.items()}
            expected["txnwatch_txnlog_records_total"] = len(records)
            expected["txnwatch_txnlog_unknown_records_total"] = 0  # every record of every version decoded
            values = _metrics(daemon, cluster)
            return {name: _counter(values, name) for name in expected}, expected

        deadline, tries = time.monotonic() + 60, 0
        got, expected = compare(records)
        while got != expected and time.monotonic() < deadline:  # the tail may be a poll behind
            time.sleep(1)
            tries += 1
            if tries % 5 == 0:  # the coordinator may have written since (e.g. a timeout abort): read it again
                records = coordinator_log(lab)
            got, expected = compare(records)
        assert got == expected
        print(f"Kafka {version}: txnwatch = DumpLogSegments = {expected}, fence attempts {attempt + 1}")
        by_id = histories(records)
        java = by_id[java_id]
        # Exactly the one fence, unless the first won the id back (then that fence of the second may be in the log too).
        assert (java.fences == 1 if not won_back else 1 <= java.fences <= 1 + won_back)
        # A timeout abort here is the coordinator's, of a transaction a starved or fenced instance left open past
        # its timeout on a loaded machine: both sides count it (the totals above); it is not a fence.
        assert java.commits > 0
        assert (by_id[python_id].commits, by_id[python_id].aborts, by_id[python_id].fences) == (4, 2, 0)

        # The Java id's own history and its timeline: every record, with the coordinator's exact time.
        detail = daemon.get(f"/api/v1/transactions/{cluster}/{java_id}", params={"timeline_limit": 1000}).json()
        h = detail["history"]
        assert (h["commits"], h["aborts"], h["epoch_bumps"], h["fences"], h["timeout_aborts"]) == (
            java.commits, java.aborts, java.epoch_bumps, java.fences, java.timeout_aborts)
        timeline = [(t["to_state"], t["producer_epoch"], _ms(t["observed_at"]), t["log_offset"])
                    for t in reversed(detail["timeline"])]
        assert timeline == [(r.state, r.producer_epoch, r.last_update_ms, r.offset) for r in java.records]
        assert not detail["timeline_truncated"]

        # The verification figures txnwatch shows are the broker's own, as its JMX exporter reports them.
        from txnwatch.kafka.broker_metrics import scrape

        def same_as_exporter() -> bool:
            (direct,) = scrape(urls, 5_000)
            values = _metrics(daemon, cluster)
            return direct.ok and (
                _counter(values, "txnwatch_broker_verifications_total", broker="1"),
                _counter(values, "txnwatch_broker_verification_failures_total", broker="1"),
            ) == (direct.verifications, direct.failures)

        wait_for(same_as_exporter, 30, what="txnwatch's broker figures to equal the exporter's")
        brokers = daemon.get("/api/v1/verification", params={"cluster": cluster}).json()["clusters"][0]["brokers"]
        assert brokers["configured"] and brokers["brokers_up"] == 1 and brokers["verifications"] > 0
    finally:
        for producer in producers:
            producer.stop()
        daemon.stop()


def _history(d: Daemon, cluster: str, tid: str) -> dict[str, Any]:
    """The id's log-derived counts from the API; zeros until txnwatch has read a record of it."""
    response = d.get(f"/api/v1/transactions/{cluster}/{tid}")
    history = response.json().get("history") if response.status_code == 200 else None
    return history or {"commits": 0, "fences": 0}
