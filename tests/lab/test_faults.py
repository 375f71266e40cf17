"""Each fault's signature, checked against what Kafka itself reports (kafka-transactions and the wire)."""

from __future__ import annotations

import time

import kafka.errors as Errors
import pytest
from kafka import TopicPartition

from tests.lab.helpers import fresh_txn_state, offsets, txn_state, wait_for
from txnwatch.lab import faults

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture
def admin(lab_cluster):
    client = lab_cluster.admin()
    yield client
    client.close()


@pytest.fixture
def ref(kafka_transactions):
    return kafka_transactions


def test_hanging_transaction_is_what_kafka_calls_hanging(lab_cluster, new_topic, admin, ref):
    topic = new_topic(partitions=1)
    with faults.inject_hanging_transaction(lab_cluster.bootstrap_servers, topic, 0) as hanging:
        # The partition holds an open transaction...
        tp = TopicPartition(topic, 0)
        producers = admin.describe_producers([tp])[tp].active_producers
        ours = [p for p in producers if p.producer_id == hanging.producer_id]
        assert len(ours) == 1 and ours[0].current_transaction_start_offset == hanging.first_offset
        ref_producers = {p["producer_id"]: p for p in ref.describe_producers(topic, 0)}
        row = ref_producers[hanging.producer_id]
        assert (row["producer_epoch"], row["current_transaction_start_offset"], row["last_timestamp"],
                row["last_sequence"], row["latest_coordinator_epoch"]) == (
            ours[0].producer_epoch, ours[0].current_transaction_start_offset, ours[0].last_timestamp,
            ours[0].last_sequence, ours[0].coordinator_epoch)

        # ...that its coordinator never heard of...
        desc = txn_state(admin, hanging.transactional_id)
        assert desc.state.value == "Empty" and not desc.topic_partitions
        ref_desc = ref.describe(hanging.transactional_id)
        assert ref_desc["transaction_state"] == "Empty" and ref_desc["topic_partitions"] == []
        assert ref_desc["producer_id"] == hanging.producer_id == desc.producer_id

        # kafka-python's find_hanging_transactions only asks coordinators, so it cannot see this case.
        assert all(t.producer_id != hanging.producer_id
                   for t in admin.find_hanging_transactions(max_transaction_timeout_ms=0))

        # ...so Kafka's own tool calls it hanging (0 min: skip the "older than the max timeout" filter).
        hanging_rows = ref.find_hanging(topic=topic, partition=0, max_transaction_timeout_min=0)
        assert [(r["producer_id"], r["producer_epoch"], r["start_offset"]) for r in hanging_rows] == [
            (hanging.producer_id, hanging.producer_epoch, hanging.first_offset)]

        # ...and read_committed consumers are stuck at its first offset.
        lso, hwm = offsets(admin, topic, 0)
        assert lso == hanging.first_offset < hwm

    lso, hwm = wait_for(lambda: (o := offsets(admin, topic, 0))[0] == o[1] and o, what="LSO == HWM after abort")
    assert lso == hwm
    assert ref.find_hanging(topic=topic, partition=0, max_transaction_timeout_min=0) == []


def test_kafka_transactions_abort_clears_a_hanging_transaction(lab_cluster, new_topic, admin, ref):
    topic = new_topic(partitions=1)
    with faults.inject_hanging_transaction(lab_cluster.bootstrap_servers, topic, 0, records=3) as hanging:
        assert offsets(admin, topic, 0)[0] == hanging.first_offset
        ref.abort(topic, 0, start_offset=hanging.first_offset)
        _lso, hwm = wait_for(lambda: (o := offsets(admin, topic, 0))[0] == o[1] and o, what="LSO == HWM")
        assert hwm == hanging.first_offset + 4  # three records and the abort marker
        producer = ref.describe_producers(topic, 0)[0]
        assert producer["producer_id"] == hanging.producer_id
        assert producer["current_transaction_start_offset"] is None
    # clear() sees nothing left to abort and does nothing


def test_lso_stall_pins_lso_until_transaction_ends(lab_cluster, new_topic, admin, ref):
    topic = new_topic(partitions=2)
    stall = faults.start_lso_stall(lab_cluster.bootstrap_servers, topic, 1)
    try:
        lso, hwm = offsets(admin, topic, 1)
        assert lso == stall.first_offset < hwm
        assert offsets(admin, topic, 0) == (0, 0)  # the other partition is unaffected
        desc = ref.describe(stall.transactional_id)
        assert desc["transaction_state"] == "Ongoing" and desc["topic_partitions"] == [(topic, 1)]
        assert desc["producer_id"] == stall.producer_id and desc["producer_epoch"] == stall.producer_epoch
        # The coordinator knows the partition, so this is a stall, not a hanging transaction.
        assert ref.find_hanging(topic=topic, partition=1, max_transaction_timeout_min=0) == []
    finally:
        stall.clear()
    wait_for(lambda: (o := offsets(admin, topic, 1))[0] == o[1], what="LSO == HWM after abort")


def test_coordinator_timeout_aborts_and_bumps_epoch(lab_cluster, new_topic, admin, ref):
    topic = new_topic(partitions=1)
    with faults.coordinator_timeout_abort(lab_cluster.bootstrap_servers, topic, transaction_timeout_ms=2000) as fault:
        assert fault.epoch_after == fault.epoch_before + 1
        desc = ref.describe(fault.transactional_id)
        assert (desc["transaction_state"], desc["producer_id"], desc["producer_epoch"]) == (
            "CompleteAbort", fault.producer_id, fault.epoch_after)
        lso, hwm = offsets(admin, topic, 0)
        assert lso == hwm  # the abort marker ended the transaction on the partition
        error = fault.late_commit()
        # KIP-588: the late producer learns it was fenced by the coordinator's epoch bump.  On the wire
        # (Kafka 3.9.1 and 4.1.1) EndTxn answers PRODUCER_FENCED, code 90, not INVALID_PRODUCER_EPOCH (47).
        assert isinstance(error, Errors.ProducerFencedError) and error.errno == 90, repr(error)


def test_second_producer_fences_the_first(lab_cluster, new_topic, admin, ref):
    topic = new_topic(partitions=1)
    with faults.fence_producer(lab_cluster.bootstrap_servers, topic) as fencing:
        assert fencing.successor_epoch > fencing.zombie_epoch
        error = fencing.zombie_commit()
        assert isinstance(error, Errors.ProducerFencedError) and error.errno == 90, repr(error)
        desc = ref.describe(fencing.transactional_id)
        assert desc["producer_epoch"] == fencing.successor_epoch
        wait_for(lambda: (o := offsets(admin, topic, 0))[0] == o[1], what="zombie's transaction aborted")


def test_frozen_leader_leaves_coordinator_in_prepare_commit(require_managed_lab, new_topic, admin):
    lab = require_managed_lab
    topic = new_topic(partitions=1, replication=1)
    fault = faults.stuck_prepare(lab, topic, 0, mode="freeze")
    try:
        wait_for(lambda: txn_state(admin, fault.transactional_id).state.value == "PrepareCommit", timeout=40,
                 what="PrepareCommit")
        time.sleep(3)
        assert txn_state(admin, fault.transactional_id).state.value == "PrepareCommit"
    finally:
        fault.clear()
    wait_for(lambda: txn_state(admin, fault.transactional_id).state.value == "CompleteCommit", timeout=60,
             what="CompleteCommit after thaw")
    assert not fault.end_error, fault.end_error

    def marker_written() -> bool:
        # A new client per try: one that fetched metadata while the thawed broker was still fenced keeps
        # answering UnknownBrokerIdError for its partitions (kafka-python does not refresh on it).
        fresh = lab.admin()
        try:
            lso, hwm = offsets(fresh, topic, 0)
            return lso == hwm
        finally:
            fresh.close()

    wait_for(marker_written, what="LSO == HWM after the marker")


def test_stopped_leader_leaves_coordinator_in_prepare_abort(require_managed_lab, new_topic, ref):
    lab = require_managed_lab
    topic = new_topic(partitions=1, replication=1)
    fault = faults.stuck_prepare(lab, topic, 0, mode="stop", commit=False)
    try:
        wait_for(lambda: fresh_txn_state(lab, fault.transactional_id) == "PrepareAbort", timeout=40,
                 what="PrepareAbort")
        assert lab.node_state(fault.leader) == "dead"
        desc = ref.describe(fault.transactional_id)
        assert (desc["transaction_state"], desc["coordinator_id"], desc["topic_partitions"]) == (
            "PrepareAbort", fault.coordinator, [(topic, 0)])
    finally:
        fault.clear()

    wait_for(lambda: fresh_txn_state(lab, fault.transactional_id) == "CompleteAbort", timeout=60,
             what="CompleteAbort after restart")


def test_coordinator_failover_moves_the_transactional_id(require_managed_lab, new_topic, ref):
    lab = require_managed_lab
    topic = new_topic(partitions=1)
    txn_id = faults.unique_transactional_id("failover")
    before = faults.transactional_producer(lab.bootstrap_servers, txn_id, 10_000)
    before.begin_transaction()
    before.send(topic, b"before-failover", partition=0).get(timeout=30)
    before.commit_transaction()
    before.close(timeout=5)
    admin = lab.admin()
    try:
        committed = wait_for(lambda: (d := txn_state(admin, txn_id)).state.value == "CompleteCommit" and d)
    finally:
        admin.close()
    with faults.fail_over_coordinator(lab, txn_id) as failover:
        new = failover.new_coordinator()
        assert new != failover.old_coordinator and lab.node_state(failover.old_coordinator) == "dead"
        # The new coordinator loaded the id's state from __transaction_state.
        desc = ref.describe(txn_id)
        assert (desc["coordinator_id"], desc["producer_id"], desc["producer_epoch"], desc["transaction_state"]) == (
            new, committed.producer_id, committed.producer_epoch, "CompleteCommit")
        # A restarted application instance carries on against the new coordinator.
        # (A producer that lived through the failover is not used here: kafka-python 3.0.12 loses its
        # pending AddPartitionsToTxn when the old coordinator's connection fails, and never sends.)
        after = faults.transactional_producer(lab.bootstrap_servers, txn_id, 10_000)
        try:
            after.begin_transaction()
            after.send(topic, b"after-failover", partition=0).get(timeout=30)
            after.commit_transaction()
        finally:
            after.close(timeout=5)
    assert lab.node_state(failover.old_coordinator) == "running"


def test_killed_broker_leaves_and_rejoins(require_managed_lab, admin):
    lab = require_managed_lab
    victim = lab.brokers[-1].node_id

    def live_brokers():
        return {b["broker_id"] for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")}

    with faults.kill_broker(lab, victim, hard=True):
        assert lab.node_state(victim) == "dead"
        wait_for(lambda: victim not in live_brokers(), timeout=30, what="broker fenced")
    wait_for(lambda: victim in live_brokers(), timeout=30, what="broker back")


def test_proxy_latency_and_cut(require_managed_lab):
    lab = require_managed_lab
    admin = lab.admin()
    try:
        def timed_metadata() -> float:
            start = time.monotonic()
            admin.describe_cluster()
            return time.monotonic() - start

        baseline = min(timed_metadata() for _ in range(3))
        with faults.add_latency(lab, None, 250):
            slowed = min(timed_metadata() for _ in range(3))
        assert slowed >= 0.45 > baseline, (baseline, slowed)  # 250 ms each way
        cut = faults.cut_connections(lab, None)
        assert cut.connections_cut >= 1
        cut.clear()
        # The first request may still land on the cut socket and fail; the client must reconnect by itself.
        wait_for(lambda: admin.describe_cluster()["brokers"], timeout=5, interval=0.1,
                 what="the admin client to reconnect after the cut")
    finally:
        admin.close()
