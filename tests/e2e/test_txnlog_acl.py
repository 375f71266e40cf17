"""Where ACLs deny __transaction_state, history falls back to polling and says why; granted, it turns exact."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from tests.e2e.test_txnlog_history import history, metric
from tests.fixtures.daemon import start_daemon, wait_for
from tests.kafka.acl_broker import WATCHER, AclBroker, acl_broker
from txnwatch.lab.faults import transactional_producer

pytestmark = pytest.mark.lab

TOPIC = "__transaction_state"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AclBroker]:
    with acl_broker(Path(tmp_path_factory.mktemp("acl-kafka"))) as running:
        yield running


def _deny(operation: ACLOperation) -> ACL:
    return ACL(principal=f"User:{WATCHER[0]}", host="*", operation=operation,
               permission_type=ACLPermissionType.DENY,
               resource_pattern=ResourcePattern(ResourceType.TOPIC, TOPIC, ACLResourcePatternType.LITERAL))


def test_denied_log_means_polling_with_the_reason_then_exact_once_granted(broker: AclBroker, sqlite_url: str) -> None:
    # A committed transaction creates __transaction_state and leaves a record to read later.
    tid = f"acl-{uuid.uuid4().hex[:6]}"
    producer = transactional_producer(broker.internal_bootstrap, tid, 10_000)
    producer.begin_transaction()
    producer.send("acl-orders", b"v")
    producer.commit_transaction()
    producer.close(timeout=5)
    admin = broker.admin()
    try:
        admin.create_acls([_deny(ACLOperation.DESCRIBE), _deny(ACLOperation.READ)])
        user, password = WATCHER
        d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                         transaction_log=dict(retry_seconds=2),
                         clusters=[dict(name="acl", bootstrap_servers=[broker.sasl_bootstrap],
                                        security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                        sasl_username=user, sasl_password=password)])
        try:
            cluster = wait_for(lambda: next((c for c in d.get("/api/v1/clusters").json() if c["up"]), None), 60,
                               what="a successful poll over SASL")
            assert cluster["history_mode"] == "polling"
            assert TOPIC in cluster["history_mode_reason"] and "Describe" in cluster["history_mode_reason"]
            assert d.get("/readyz").json()["history"]["acl"]["mode"] == "polling"
            assert metric(d, "txnwatch_history_mode", cluster="acl", mode="polling") == 1

            admin.delete_acls([ACLFilter(principal=None, host="*", operation=ACLOperation.ANY,
                                         permission_type=ACLPermissionType.ANY,
                                         resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, TOPIC,
                                                                                ACLResourcePatternType.LITERAL))])
            wait_for(lambda: metric(d, "txnwatch_history_mode", cluster="acl", mode="exact") == 1, 60,
                     what="exact mode once the ACL is gone")
            got = wait_for(lambda: history(d, "acl", tid), 30, what="the id's history read from the log")
            assert got["history"]["commits"] == 1
            assert d.get("/api/v1/clusters").json()[0]["history_mode"] == "exact"
        finally:
            d.stop()
    finally:
        admin.close()
