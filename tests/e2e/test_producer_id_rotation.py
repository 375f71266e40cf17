"""A producer id rotation on a Kafka that writes the PreviousProducerId tag, against Kafka's own DumpLogSegments.

On the newest line (4.4.0; 4.3+ write the tag, 4.1.1 and older never do: KAFKA-20310) one transactional id is
initialised until its epoch is exhausted: each InitProducerId bumps the epoch by one, and the one that finds it at
32,766 moves the id to a new producer id at epoch 0 (KIP-360, ``prepareProducerIdRotation``).  That is about
32,800 records of ``__transaction_state`` (~1 min of raw InitProducerId requests on a loaded machine).

Kafka's reading of the segment files (txnwatch.lab.dumplog) is the reference: the rotation record carries
previousProducerId = the old producer id; txnwatch's counters (producer id changes, epoch bumps) and the id's
newest transitions must be the same, the rotation's linking the old producer id to the new one.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.producer import InitProducerIdRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.lab.dumplog import Totals, coordinator_log, histories
from txnwatch.lab.faults import unique_transactional_id
from txnwatch.lab.jars import NEWEST_KAFKA_VERSION
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings
from txnwatch.lab.wire import admin_client, find_transaction_coordinator, send

pytestmark = [pytest.mark.lab, pytest.mark.slow]
CLUSTER = "rotating"
#: Kafka refuses an epoch of Short.MAX_VALUE - 1 or more to a client (TransactionMetadata.isEpochExhausted).
EXHAUSTED_EPOCH = 32_766
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS: asked again.
RETRIABLE = frozenset({14, 15, 16, 51})


@pytest.fixture(scope="module")
def newest_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from txnwatch.lab.cluster import start_lab

    settings = LabSettings(brokers=1, combined=True, proxy=False, kafka_version=NEWEST_KAFKA_VERSION,
                           transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS))
    lab = start_lab(settings, tmp_path_factory.mktemp(f"txnwatch-lab-{NEWEST_KAFKA_VERSION}"), die_with_parent=True)
    try:
        yield lab
    finally:
        lab.down()


def exhaust_epochs(bootstrap: str, tid: str) -> tuple[int, int]:
    """InitProducerId until the id moves to another producer id; returns (old producer id, new producer id)."""
    admin = admin_client(bootstrap)
    try:
        node = wait_for(lambda: _coordinator(admin, tid), 60, what=f"the coordinator of {tid}")
        first: int | None = None
        for _ in range(EXHAUSTED_EPOCH + 100):
            response = send(admin, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10_000,
                                                         max_version=4), node_id=node)
            if response.error_code in RETRIABLE:
                time.sleep(0.05)
                continue
            assert response.error_code == 0, f"InitProducerId({tid}) answered error {response.error_code}"
            pid = int(response.producer_id)
            if first is None:
                first = pid
            elif pid != first:
                assert int(response.producer_epoch) == 0
                return first, pid
        raise AssertionError(f"{tid} never moved off producer id {first}")
    finally:
        admin.close()


def _coordinator(admin: Any, tid: str) -> int | None:
    try:
        return find_transaction_coordinator(admin, tid)
    except Exception:  # __transaction_state may still be loading: the caller waits
        return None


def counters(d: Daemon) -> dict[str, float]:
    return {s.name: s.value for family in text_string_to_metric_families(d.get("/metrics").text)
            for s in family.samples if s.labels.get("cluster") == CLUSTER and s.name.endswith("_total")}


def test_rotation_history_equals_dump_log_segments(newest_lab: Any, tmp_path: Path) -> None:
    bootstrap = newest_lab.bootstrap_servers
    tid = unique_transactional_id("rotate")
    old_pid, new_pid = exhaust_epochs(bootstrap, tid)

    reference = histories(coordinator_log(newest_lab))
    mine = reference[tid]
    rotation = mine.records[-1]
    assert (rotation.state, rotation.producer_id, rotation.producer_epoch) == ("Empty", new_pid, 0)
    assert rotation.previous_producer_id == old_pid, "Kafka 4.3+ writes PreviousProducerId (KAFKA-20310)"
    assert all(r.previous_producer_id == old_pid for r in mine.records), "the tag is on every record"
    assert (mine.producer_id_changes, mine.epoch_bumps) == (1, EXHAUSTED_EPOCH)
    totals = Totals.of(reference)

    daemon = start_daemon(database_url=f"sqlite:///{tmp_path / 'txnwatch.db'}", poll_interval_seconds=2,
                          clusters=[dict(name=CLUSTER, bootstrap_servers=bootstrap)])
    try:
        seen = wait_for(lambda: (c := counters(daemon)).get("txnwatch_txnlog_records_total", 0)
                        >= len(mine.records) and c.get("txnwatch_producer_id_changes_total") is not None and c,
                        180, what="the rotation read from the log")
        got = daemon.get(f"/api/v1/transactions/{CLUSTER}/{tid}", params={"timeline_limit": 20}).json()
    finally:
        daemon.stop()
    assert seen["txnwatch_producer_id_changes_total"] == totals.producer_id_changes == 1
    assert seen["txnwatch_producer_epoch_bumps_total"] == totals.epoch_bumps
    logged = [t for t in got["timeline"] if t["log_offset"] is not None]  # the polls' own inferences apart
    newest = logged[0]
    assert (newest["log_offset"], newest["to_state"]) == (rotation.offset, "Empty")
    assert (newest["prev_producer_id"], newest["prev_producer_epoch"]) == (old_pid, EXHAUSTED_EPOCH)
    assert (newest["producer_id"], newest["producer_epoch"]) == (new_pid, 0)
    assert "producer_id_change" in newest["events"]
    before = logged[1]
    assert (before["producer_id"], before["producer_epoch"]) == (old_pid, EXHAUSTED_EPOCH)
    assert "epoch_bump" in before["events"] and "producer_id_change" not in before["events"]
    assert got["history"]["epoch_bumps"] == EXHAUSTED_EPOCH
    assert (got["history"]["producer_id"], got["history"]["producer_epoch"]) == (new_pid, 0)
