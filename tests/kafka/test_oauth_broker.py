"""SASL/OAUTHBEARER end to end: a real broker validating JWTs from a local OIDC issuer, watched by the daemon.

The broker is the session's secure test broker (tests/kafka/conftest.py), whose SASL listener also
enables OAUTHBEARER.

txnwatch obtains its token by the client-credentials grant over HTTPS (the issuer's
certificate from a private CA, given as sasl_oauth_ca_file), the broker checks it against
the issuer's JWKS with Kafka's own validator, and the daemon polls the cluster and sees a
transaction that a producer, authenticated the same way, keeps open.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from kafka import KafkaProducer
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import start_daemon, wait_for
from tests.kafka.conftest import SecureKafka
from tests.kafka.oauth_broker import CLIENT_ID, CLIENT_SECRET, Issuer
from txnwatch.core.logs import configure
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings, ClusterUnreachable
from txnwatch.kafka.oauth import OAuthSettings, OidcTokenProvider

pytestmark = [pytest.mark.lab, pytest.mark.slow]
SECRET_ENV = "TXNWATCH_TEST_OIDC_SECRET"


@dataclass(frozen=True)
class OAuthBroker:
    bootstrap: str
    issuer: Issuer


@pytest.fixture
def broker(secure_kafka: SecureKafka) -> OAuthBroker:
    return OAuthBroker(secure_kafka.broker.sasl_bootstrap, secure_kafka.issuer)


def _oauth(broker: OAuthBroker, secret: str = CLIENT_SECRET) -> OAuthSettings:
    return OAuthSettings(token_endpoint_url=broker.issuer.token_url, client_id=CLIENT_ID, client_secret=secret,
                         scope="kafka.watch", ca_file=str(broker.issuer.ca))


def _gauge(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                return float(sample.value)
    return None


def test_daemon_watches_an_oauthbearer_cluster(broker: OAuthBroker, sqlite_url: str, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    daemon = start_daemon(database_url=sqlite_url, poll_interval_seconds=1, clusters=[dict(
        name="oauth", bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER", sasl_oauth_token_endpoint_url=broker.issuer.token_url,
        sasl_oauth_client_id=CLIENT_ID, sasl_oauth_client_secret_env=SECRET_ENV, sasl_oauth_scope="kafka.watch",
        sasl_oauth_ca_file=str(broker.issuer.ca))])
    producer: Any = None
    try:
        wait_for(lambda: _gauge(daemon.get("/metrics").text, "txnwatch_cluster_up", cluster="oauth") == 1, 90,
                 what="a successful poll over OAUTHBEARER")
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism="OAUTHBEARER", transactional_id="oauth-e2e",
                                 sasl_oauth_token_provider=OidcTokenProvider(_oauth(broker)))
        producer.init_transactions()
        producer.begin_transaction()
        producer.send("oauth-orders", b"paid").get(timeout=30)
        wait_for(lambda: _gauge(daemon.get("/metrics").text, "txnwatch_transactions", cluster="oauth",
                                state="Ongoing") == 1, 60, what="the open transaction in txnwatch_transactions")
        producer.commit_transaction()
        wait_for(lambda: _gauge(daemon.get("/metrics").text, "txnwatch_transactions", cluster="oauth",
                                state="CompleteCommit") == 1, 60, what="the committed transaction")
    finally:
        if producer is not None:
            producer.close(timeout=5)
        daemon.stop()
    tokens = {claims["sub"] for claims in broker.issuer.issued}
    assert tokens == {CLIENT_ID} and {c["scope"] for c in broker.issuer.issued} == {"kafka.watch"}
    # kafka-python's own DEBUG lines print SASL request bytes; txnwatch pins the "kafka" loggers at ERROR
    # (txnwatch.core.logs.configure), so only its own and the HTTP client's records can reach an operator.
    logged = "\n".join(r.getMessage() for r in caplog.records if not r.name.startswith("kafka"))
    assert "obtained an OAuth token" in logged
    assert CLIENT_SECRET not in logged and "eyJ" not in logged  # neither the secret nor a JWT
    root, kafka_logger = logging.getLogger(), logging.getLogger("kafka")
    saved = (root.handlers[:], root.level, kafka_logger.level)
    try:
        configure("DEBUG")
        assert kafka_logger.getEffectiveLevel() >= logging.ERROR
    finally:
        root.handlers[:], _, _ = saved
        root.setLevel(saved[1])
        kafka_logger.setLevel(saved[2])


def test_wrong_client_secret_is_reported_without_the_secret(broker: OAuthBroker) -> None:
    settings = ClusterConnectionSettings(name="oauth", bootstrap_servers=(broker.bootstrap,),
                                         security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
                                         oauth=_oauth(broker, secret="not-the-secret"), request_timeout_ms=3000)
    with ClusterConnection(settings) as connection, pytest.raises(ClusterUnreachable) as refused:
        connection.poll()
    message = str(refused.value)
    assert "not-the-secret" not in message
    assert "HTTP 401" in message and "invalid_client" in message, message
