"""pytest fixtures giving tests a real Kafka lab cluster (see tests/conftest.py).

`lab_cluster`: one cluster per test session, shared by every module: 3 brokers
behind the lab's TCP proxy, the explicit pre-KIP-890 setting (partition
verification off, so hanging transactions can be injected) and
transaction.max.timeout.ms = LAB_TRANSACTION_MAX_TIMEOUT_MS (15 s), so producers
in tests must use transaction.timeout.ms <= 15000.

`kafka4_lab`: what a Kafka 4 user runs: one broker with Kafka's defaults
(verification on, transaction.version 2 finalized on 4.x), transaction.max.timeout.ms
KAFKA4_LAB_TRANSACTION_MAX_TIMEOUT_MS (60 s: its tests abort ongoing transactions by id), with
the Prometheus JMX exporter agent in the broker (`kafka4_lab.broker_metrics_urls()`).
`java_producer` starts Kafka's own Java transactional producer against it.

Clusters start lazily, only when a test asks for them, and their processes die
with the pytest process even if it is killed.

TXNWATCH_LAB_BOOTSTRAP=host:port,... uses an existing cluster instead
(process-level faults are then unavailable: `require_managed_lab` skips).
TXNWATCH_LAB_KAFKA_VERSION selects the Kafka version (default 4.1.1).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION


@pytest.fixture(scope="session")
def lab_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    bootstrap = os.environ.get("TXNWATCH_LAB_BOOTSTRAP")
    if bootstrap:
        from txnwatch.lab.external import ExternalLab

        yield ExternalLab(bootstrap)
        return
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

    # Explicitly pre-KIP-890: many tests inject hanging transactions, which verification would reject.
    # The brokers run the JMX exporter, as the demo's do, so the brokers' own figures can be read.
    settings = LabSettings(brokers=3, jmx_exporter=True,
                           kafka_version=os.environ.get("TXNWATCH_LAB_KAFKA_VERSION", DEFAULT_KAFKA_VERSION),
                           transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS,
                                                            partition_verification_enable=False))
    lab = start_lab(settings, tmp_path_factory.mktemp("txnwatch-lab"), die_with_parent=True)
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="session")
def kafka4_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One broker on Kafka's defaults: partition verification on, Kafka's default transaction.version
    (2 on Kafka 4.x, so Java clients bump the epoch on every commit and abort).  No proxy, combined node:
    a cheap cluster (~5-15 s to start) for what users run; faults that need verification off belong on
    `lab_cluster`.  The broker runs the Prometheus JMX exporter agent, as most operators' brokers do."""
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import KAFKA4_LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

    settings = LabSettings(brokers=1, combined=True, proxy=False, jmx_exporter=True,
                           kafka_version=os.environ.get("TXNWATCH_LAB_KAFKA_VERSION", DEFAULT_KAFKA_VERSION),
                           transactions=TransactionSettings(max_timeout_ms=KAFKA4_LAB_TRANSACTION_MAX_TIMEOUT_MS))
    lab = start_lab(settings, tmp_path_factory.mktemp("txnwatch-lab-kafka4"), die_with_parent=True)
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture
def java_producer(kafka4_lab: Any, tmp_path: Any) -> Iterator[Callable[..., Any]]:
    """`java_producer(transactional_id, topic, **spec) -> JavaProducer`: Kafka's own Java transactional
    producer (ProducerPerformance) against `kafka4_lab`, with the lab's Kafka version; every one started is
    stopped after the test.  Keyword arguments are JavaProducerSpec fields (duration_s, records_per_second,
    transaction_duration_ms, ...)."""
    from txnwatch.lab.java_clients import JavaProducerSpec, start_java_producer

    started: list[Any] = []

    def make(transactional_id: str, topic: str, **spec: Any) -> Any:
        producer = start_java_producer(kafka4_lab.bootstrap_servers,
                                       JavaProducerSpec(transactional_id=transactional_id, topic=topic, **spec),
                                       tmp_path / "java", kafka_version=kafka4_lab.kafka_version)
        started.append(producer)
        return producer

    try:
        yield make
    finally:
        for producer in started:
            producer.stop()


@pytest.fixture(scope="session")
def kafka_transactions(lab_cluster: Any) -> Any:
    """Kafka's own kafka-transactions tool bound to the lab (`.list()`, `.describe(id)`,
    `.describe_producers(topic, p)`, `.find_hanging(...)`, `.abort(...)`), parsed into dicts."""
    from txnwatch.lab.reference import KafkaTransactionsTool

    return KafkaTransactionsTool(lab_cluster.bootstrap_servers, lab_cluster.kafka_version)


@pytest.fixture
def require_managed_lab(lab_cluster: Any) -> Any:
    """For tests that stop, freeze or proxy brokers: skip on an external cluster."""
    if not getattr(lab_cluster, "managed", True):
        pytest.skip("needs a lab-managed cluster (TXNWATCH_LAB_BOOTSTRAP is set)")
    return lab_cluster


@pytest.fixture
def new_topic(lab_cluster: Any, request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """`new_topic(partitions=3, replication=min(3, brokers), configs=None) -> name`, uniquely named after
    the test and ready (every partition has a leader).  Deleted, best effort, after the test."""
    from txnwatch.lab.topics import create_topic, delete_topics_quietly, unique_topic_name

    admin = lab_cluster.admin()
    created: list[str] = []
    default_rf = min(3, len(lab_cluster.brokers))

    def make(partitions: int = 3, replication: int | None = None, configs: dict[str, str] | None = None) -> str:
        name = unique_topic_name(request.node.name)
        create_topic(admin, name, partitions, replication or default_rf, configs=configs)
        created.append(name)
        return name

    try:
        yield make
    finally:
        delete_topics_quietly(admin, created)
        admin.close()


@pytest.fixture
def new_topic_on(request: pytest.FixtureRequest) -> Iterator[Callable[..., str]]:
    """`new_topic_on(lab, partitions=1, replication=None) -> name`: like `new_topic`, on any lab (e.g.
    `kafka4_lab`), replicated min(3, brokers) ways by default.  Deleted, best effort, after the test."""
    from txnwatch.lab.topics import create_topic, delete_topics_quietly, unique_topic_name

    created: list[tuple[Any, str]] = []

    def make(lab: Any, partitions: int = 1, replication: int | None = None,
             configs: dict[str, str] | None = None) -> str:
        name = unique_topic_name(request.node.name)
        admin = lab.admin()
        try:
            create_topic(admin, name, partitions, replication or min(3, len(lab.brokers)), configs=configs)
        finally:
            admin.close()
        created.append((lab, name))
        return name

    try:
        yield make
    finally:
        for lab, name in created:
            admin = lab.admin()
            try:
                delete_topics_quietly(admin, [name])
            finally:
                admin.close()
