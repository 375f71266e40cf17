"""The canary's Kafka side (txnwatch.kafka.canary) on the shared 3-broker lab, and the kafka-python internals it
leans on.

* topic management as KMinion's: a fresh topic gets one partition led by each broker; a topic whose partitions
  are all led by one broker gets a partition for each broker that leads none;
* the coordinator it reports is Kafka's own (the lab's FindCoordinator) and leads the ``__transaction_state``
  partition txnwatch computes for the id;
* one transaction is acknowledged and handed to the read_committed reader; a failed step is data, never raised;
* the pins: ``commit_transaction`` waits without a bound, so the client calls ``TransactionManager.begin_commit``
  and waits on its result with a timeout; a kafka-python that renames these fails here first.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.producer.transaction_manager import TransactionalRequestResult, TransactionManager

from txnwatch.core.canary import CanaryStage, transaction_state_partition
from txnwatch.core.config import ClusterConfig
from txnwatch.core.model import TRANSACTION_STATE_TOPIC
from txnwatch.kafka.canary import CanaryClient, step_error
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.lab.faults import unique_transactional_id
from txnwatch.lab.topics import create_topic, delete_topics_quietly, unique_topic_name


def test_the_kafka_python_internals_the_commit_timeout_needs() -> None:
    assert callable(TransactionManager.begin_commit)
    assert "timeout_ms" in inspect.signature(TransactionalRequestResult.wait).parameters
    result = TransactionalRequestResult()
    assert result.wait(timeout_ms=1) is False  # not done: False, not an exception
    assert "_transaction_manager" in inspect.getsource(KafkaProducer.__init__)
    assert "_sender" in inspect.getsource(KafkaProducer.__init__)


def test_a_kafka_python_timeout_is_request_timed_out_and_retriable() -> None:
    from kafka import errors as Errors

    error = step_error(CanaryStage.INIT, Errors.KafkaTimeoutError("Timeout expired"))
    assert (error.name, error.error_class.value) == ("REQUEST_TIMED_OUT", "retriable")
    fenced = step_error(CanaryStage.COMMIT, Errors.ProducerFencedError())
    assert (fenced.name, fenced.error_class.value) == ("PRODUCER_FENCED", "application-recoverable")


@pytest.fixture
def client(lab_cluster: Any) -> Iterator[CanaryClient]:
    topic = unique_topic_name("canary")
    settings = ClusterConnectionSettings.from_config(
        ClusterConfig(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers.split(",")))
    made = CanaryClient(settings, topic=topic, transactional_id=unique_transactional_id("canary"),
                        replication_factor=3, transaction_timeout_ms=10_000, timeout_ms=5_000)
    try:
        yield made
    finally:
        made.close()
        admin = lab_cluster.admin()
        try:
            delete_topics_quietly(admin, [topic])
        finally:
            admin.close()


def preferred_leaders(lab: Any, topic: str, count: int) -> list[int]:
    """Each partition's first replica, once ``count`` partitions show (a broker's metadata may lag a moment)."""
    admin = lab.admin()
    try:
        deadline = time.monotonic() + 20
        while True:
            parts = sorted(admin.describe_topics([topic])[0]["partitions"], key=lambda p: p["partition_index"])
            if len(parts) >= count or time.monotonic() > deadline:
                return [int(p["replica_nodes"][0]) for p in parts]
            time.sleep(0.2)
    finally:
        admin.close()


def test_a_new_topic_has_a_partition_led_by_each_broker(client: CanaryClient, lab_cluster: Any) -> None:
    leaders, error = client.ensure_topic()
    assert error is None
    brokers = sorted(b.node_id for b in lab_cluster.brokers)
    assert sorted(leaders) == list(range(len(brokers))) and sorted(v for v in leaders.values() if v is not None) == brokers
    assert sorted(preferred_leaders(lab_cluster, client.topic, len(brokers))) == brokers
    assert client.ensure_topic() == (leaders, None)  # nothing to do the second time


def test_brokers_leading_none_get_a_partition(client: CanaryClient, lab_cluster: Any) -> None:
    brokers = sorted(b.node_id for b in lab_cluster.brokers)
    admin = lab_cluster.admin()
    try:
        create_topic(admin, client.topic, partitions=1, replication=1)
    finally:
        admin.close()
    (only,) = preferred_leaders(lab_cluster, client.topic, 1)
    leaders, error = client.ensure_topic()
    assert error is None and len(leaders) == len(brokers)
    preferred = preferred_leaders(lab_cluster, client.topic, len(brokers))
    assert preferred[0] == only and sorted(preferred) == brokers
    assert client.ensure_topic()[1] is None and len(preferred_leaders(lab_cluster, client.topic, 3)) == 3  # no more


def test_the_coordinator_is_kafkas_and_leads_the_computed_partition(client: CanaryClient, lab_cluster: Any) -> None:
    location = client.locate()
    assert location.error is None
    assert location.broker_id == lab_cluster.transaction_coordinator(client.transactional_id)
    admin = lab_cluster.admin()
    try:
        parts = admin.describe_topics([TRANSACTION_STATE_TOPIC])[0]["partitions"]
    finally:
        admin.close()
    assert location.state_partition == transaction_state_partition(client.transactional_id, len(parts))
    assert location.state_leader == location.broker_id and location.broker_id in location.state_replicas


def test_one_transaction_is_acknowledged_and_seen_read_committed(client: CanaryClient) -> None:
    leaders, _ = client.ensure_topic()
    partitions = tuple(sorted(leaders))
    assert client.read(partitions, 0) == []
    for partition in partitions:
        assert client.commit(partition, f"token-{partition}".encode()) is None
    seen: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    while len(seen) < len(partitions) and time.monotonic() < deadline:
        seen += client.read(partitions, 200)
    assert sorted(seen) == [(p, f"token-{p}".encode()) for p in partitions]


def test_a_failed_step_is_data(client: CanaryClient) -> None:
    error = client.commit(99, b"no such partition")  # the topic has 3: the send cannot be placed
    assert error is not None and error.stage in (CanaryStage.INIT, CanaryStage.PRODUCE)
    assert client.commit(99, b"again") is not None  # a new producer each time: still data
