"""A producer id rotation on a Kafka that writes the producer id tags, against Kafka's own DumpLogSegments.

On the newest line (4.4.0; 4.3+ write the tags, 4.1.1 and older never do: KAFKA-20310) one transactional id runs
transaction version 2 aborts over the wire (InitProducerId, then EndTxn v5 with nothing added: TV2 allows an abort
from Empty or Complete*), each of which bumps the epoch.  The abort that bumps to 32,767 is the rotation:
the coordinator picks the next producer id, writes it as NextProducerId on the PrepareAbort, and completes under it
at epoch 0 with PreviousProducerId = the old one (``prepareAbortOrCommit``, ``prepareComplete``).  That is about
65,500 records of ``__transaction_state`` (~2-3 min of raw requests on a loaded machine).

Kafka's reading of the segment files (txnwatch.lab.dumplog) is the reference: the tags are where the source says;
txnwatch's counters (producer id changes, epoch bumps, aborts) equal it, its rotation transition links the old
producer id to the new one, and the PrepareAbort's transition names the coming producer id.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.lab.dumplog import Totals, coordinator_log, histories
from txnwatch.lab.faults import unique_transactional_id
from txnwatch.lab.jars import NEWEST_KAFKA_VERSION
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings
from txnwatch.lab.wire import admin_client, find_transaction_coordinator, send

pytestmark = [pytest.mark.lab, pytest.mark.slow]
CLUSTER = "rotating"
#: The epoch a TV2 EndTxn bumps to when the coordinator rotates (Short.MAX_VALUE: never handed to a client).
ROTATION_EPOCH = 32_767
#: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS (the previous
#: abort's CompleteAbort still being written): asked again.
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


def _answer(admin: Any, node: int, request: Any, what: str) -> Any:
    while True:
        response = send(admin, request, node_id=node)
        if response.error_code not in RETRIABLE:
            assert response.error_code == 0, f"{what} answered error {response.error_code}"
            return response
        time.sleep(0.005)  # CONCURRENT_TRANSACTIONS clears within a few ms; ~160 of ~32,900 requests retry


def abort_until_rotated(bootstrap: str, tid: str) -> tuple[int, int]:
    """TV2 aborts until the id moves to another producer id; returns (old producer id, new producer id)."""
    admin = admin_client(bootstrap)
    try:
        node = wait_for(lambda: _coordinator(admin, tid), 60, what=f"the coordinator of {tid}")
        init = _answer(admin, node, InitProducerIdRequest(transactional_id=tid, transaction_timeout_ms=10_000,
                                                          producer_id=-1, producer_epoch=-1), f"InitProducerId({tid})")
        first, pid, epoch = int(init.producer_id), int(init.producer_epoch), int(init.producer_epoch)
        for _ in range(ROTATION_EPOCH + 1):
            ended = _answer(admin, node, EndTxnRequest(transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                                                       committed=False, min_version=5), f"EndTxn({tid})")
            pid, epoch = int(ended.producer_id), int(ended.producer_epoch)
            if pid != first:
                assert epoch == 0
                return first, pid
        raise AssertionError(f"{tid} never moved off producer id {first} (epoch {epoch})")
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


def test_tv2_rotation_history_equals_dump_log_segments(newest_lab: Any, tmp_path: Path) -> None:
    bootstrap = newest_lab.bootstrap_servers
    tid = unique_transactional_id("rotate")
    old_pid, new_pid = abort_until_rotated(bootstrap, tid)

    reference = histories(coordinator_log(newest_lab))
    mine = reference[tid]
    prepare, moved = mine.records[-2:]
    assert (prepare.state, prepare.producer_id, prepare.producer_epoch) == ("PrepareAbort", old_pid, ROTATION_EPOCH)
    assert prepare.next_producer_id == new_pid, "Kafka 4.3+ writes NextProducerId on the rotating Prepare*"
    assert (moved.state, moved.producer_id, moved.producer_epoch) == ("CompleteAbort", new_pid, 0)
    assert moved.previous_producer_id == old_pid, "Kafka 4.3+ writes PreviousProducerId (KAFKA-20310)"
    assert all(r.previous_producer_id == old_pid for r in mine.records), "the tag is on every record"
    assert mine.producer_id_changes == 1
    totals = Totals.of(reference)

    daemon = start_daemon(database_url=f"sqlite:///{tmp_path / 'txnwatch.db'}", poll_interval_seconds=2,
                          clusters=[dict(name=CLUSTER, bootstrap_servers=bootstrap)])
    try:
        seen = wait_for(lambda: (c := counters(daemon)).get("txnwatch_txnlog_records_total", 0)
                        >= len(mine.records) and c.get("txnwatch_producer_id_changes_total") is not None and c,
                        240, what="the rotation read from the log")
        got = daemon.get(f"/api/v1/transactions/{CLUSTER}/{tid}", params={"timeline_limit": 20}).json()
    finally:
        daemon.stop()
    assert seen["txnwatch_producer_id_changes_total"] == totals.producer_id_changes == 1
    assert seen["txnwatch_producer_epoch_bumps_total"] == totals.epoch_bumps
    assert seen["txnwatch_transaction_aborts_total"] == totals.aborts
    logged = [t for t in got["timeline"] if t["log_offset"] is not None]  # the polls' own inferences apart
    newest, before = logged[0], logged[1]
    assert (newest["log_offset"], newest["to_state"]) == (moved.offset, "CompleteAbort")
    assert (newest["prev_producer_id"], newest["prev_producer_epoch"]) == (old_pid, ROTATION_EPOCH)
    assert (newest["producer_id"], newest["producer_epoch"]) == (new_pid, 0)
    assert "producer_id_change" in newest["events"] and "abort" in newest["events"]
    assert (before["log_offset"], before["to_state"], before["producer_id"]) == (prepare.offset, "PrepareAbort",
                                                                                 old_pid)
    assert "producer_id_change" not in before["events"]
    assert (before["detail"] or "").startswith(f"next producer id {new_pid}:"), "the rotation named at Prepare*"
    assert (got["history"]["producer_id"], got["history"]["producer_epoch"]) == (new_pid, 0)
