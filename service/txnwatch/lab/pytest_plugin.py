"""pytest fixtures giving tests a real Kafka lab cluster (see tests/conftest.py).

One cluster per test session, shared by every module: 3 brokers behind the
lab's TCP proxy, partition verification off (hanging transactions can be
injected) and transaction.max.timeout.ms = LAB_TRANSACTION_MAX_TIMEOUT_MS
(15 s), so producers in tests must use transaction.timeout.ms <= 15000.
The cluster starts lazily, only when a test asks for `lab_cluster`, and its
processes die with the pytest process even if it is killed.

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

    settings = LabSettings(brokers=3,
                           kafka_version=os.environ.get("TXNWATCH_LAB_KAFKA_VERSION", DEFAULT_KAFKA_VERSION),
                           transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS))
    lab = start_lab(settings, tmp_path_factory.mktemp("txnwatch-lab"), die_with_parent=True)
    try:
        yield lab
    finally:
        lab.down()


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
