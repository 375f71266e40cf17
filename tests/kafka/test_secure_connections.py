"""SASL (PLAIN, SCRAM) and mutual TLS settings reach Kafka and work against a real broker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.kafka.conftest import SecureKafka
from tests.kafka.secure_broker import HOSTILE_PLAIN, USERS, SecureBroker
from txnwatch.core.model import ClusterSnapshot
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings, ClusterUnreachable

pytestmark = [pytest.mark.lab, pytest.mark.slow]


@pytest.fixture
def broker(secure_kafka: SecureKafka) -> SecureBroker:
    return secure_kafka.broker


def poll_until_up(settings: ClusterConnectionSettings, timeout: float = 60) -> ClusterSnapshot:
    """The broker listens before its metadata is ready; a fresh connection per try keeps backoff out of it."""
    deadline = time.monotonic() + timeout
    while True:
        with ClusterConnection(settings) as connection:
            try:
                return connection.poll()
            except ClusterUnreachable:
                if time.monotonic() > deadline:
                    raise
        time.sleep(0.5)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl(broker: SecureBroker, mechanism: str) -> None:
    user, password = USERS[mechanism]
    snap = poll_until_up(ClusterConnectionSettings(
        name="sasl", bootstrap_servers=(broker.sasl_bootstrap,), security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism, sasl_username=user, sasl_password=password))  # type: ignore[arg-type]  # the test passes each mechanism as a plain string
    assert [b.node_id for b in snap.brokers] == [1] and snap.errors == ()


def test_hostile_password_round_trips_from_a_kubernetes_secret_to_a_sasl_login(
        broker: SecureBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Helm values -> Secret -> mounted file -> settings loader -> PLAIN login (issue 15, defect 3)."""
    from tests.deploy.tools import pod_settings, render_chart

    user, password = HOSTILE_PLAIN
    docs = render_chart({"config": {"clusters": [
        {"name": "hostile", "bootstrap_servers": [broker.sasl_bootstrap], "security_protocol": "SASL_PLAINTEXT",
         "sasl_mechanism": "PLAIN", "sasl_username": user}]},
        "secrets": {"saslPasswords": {"hostile": password}}}, tmp_path)
    (cluster,) = pod_settings(docs, tmp_path, monkeypatch).clusters
    snap = poll_until_up(ClusterConnectionSettings.from_config(cluster))
    assert [b.node_id for b in snap.brokers] == [1]


def test_sasl_wrong_password_is_unreachable(broker: SecureBroker) -> None:
    poll_until_up(ClusterConnectionSettings(name="sasl", bootstrap_servers=(broker.sasl_bootstrap,),
                                            security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                            sasl_username="alice", sasl_password="alice-secret"))
    settings = ClusterConnectionSettings(name="sasl", bootstrap_servers=(broker.sasl_bootstrap,),
                                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN",
                                         sasl_username="alice", sasl_password="wrong", request_timeout_ms=2000)
    with ClusterConnection(settings) as connection, pytest.raises(ClusterUnreachable) as refused:
        connection.poll()
    assert "check the SASL credentials" in str(refused.value) and "wrong" not in str(refused.value)


def _ssl(broker: SecureBroker, **overrides: Any) -> ClusterConnectionSettings:
    values: dict[str, Any] = {
        "name": "tls", "bootstrap_servers": (broker.ssl_bootstrap,), "security_protocol": "SSL",
        "ssl_cafile": str(broker.ca), "ssl_certfile": str(broker.client_cert), "ssl_keyfile": str(broker.client_key),
        "request_timeout_ms": 3000}
    values.update(overrides)
    return ClusterConnectionSettings(**values)


def test_mutual_tls_with_custom_ca(broker: SecureBroker) -> None:
    snap = poll_until_up(_ssl(broker))
    assert [b.node_id for b in snap.brokers] == [1] and snap.errors == ()


def test_tls_without_client_certificate_is_refused(broker: SecureBroker) -> None:
    poll_until_up(_ssl(broker))
    without_certificate = _ssl(broker, ssl_certfile=None, ssl_keyfile=None)
    with ClusterConnection(without_certificate) as connection, pytest.raises(ClusterUnreachable) as refused:
        connection.poll()
    assert "ssl_certfile" in str(refused.value)
