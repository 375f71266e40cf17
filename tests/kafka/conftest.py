"""One secure broker per session, shared by the SASL/TLS and the OAUTHBEARER tests (a broker start is the slow part)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.kafka.oauth_broker import Issuer, broker_jvm_options, broker_properties, oidc_issuer
from tests.kafka.secure_broker import SecureBroker, secure_broker


@dataclass(frozen=True)
class SecureKafka:
    broker: SecureBroker
    issuer: Issuer


@pytest.fixture(scope="session")
def secure_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    with oidc_issuer(tmp_path_factory.mktemp("oidc-issuer")) as issuer, \
            secure_broker(tmp_path_factory.mktemp("secure-kafka"), oauth_properties=broker_properties(issuer),
                          jvm_options=broker_jvm_options(issuer)) as broker:
        yield SecureKafka(broker, issuer)
