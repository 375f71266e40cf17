"""Configuration of OAUTHBEARER, GSSAPI and AWS_MSK_IAM: what is accepted, what is refused and why.

GSSAPI cannot be exercised against a KDC here (see docs/connecting.md); this pins the
configuration path up to kafka-python's GSSAPI mechanism: service and domain names reach
its config, and a missing gssapi package is a configuration error, not a crash at connect.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from txnwatch.core.config import ClusterConfig
from txnwatch.kafka.settings import ClusterConnectionSettings

OAUTH: dict[str, Any] = dict(name="cc", bootstrap_servers=["pkc-1.example:9092"], security_protocol="SASL_SSL",
                             sasl_mechanism="OAUTHBEARER", sasl_oauth_token_endpoint_url="https://idp.example/token",
                             sasl_oauth_client_id="txnwatch", sasl_oauth_client_secret_env="IDP_SECRET")


@pytest.mark.parametrize(("changes", "problem"), [
    pytest.param({"sasl_oauth_token_endpoint_url": "http://idp.example/token"}, "must be https",
                 id="secret-over-plain-http"),
    pytest.param({"sasl_oauth_client_secret": "x"}, "exactly one of", id="two-secret-sources"),
    pytest.param({"sasl_oauth_client_secret_env": None}, "exactly one of", id="no-secret-source"),
    pytest.param({"sasl_oauth_client_id": None}, "sasl_oauth_client_id", id="no-client-id"),
    pytest.param({"sasl_username": "u", "sasl_password": "p"}, "for PLAIN and SCRAM", id="password-with-oauth"),
])
def test_oauth_mistakes_are_refused_with_the_reason(changes: dict[str, Any], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        ClusterConfig(**{**OAUTH, **changes})


def test_oauth_settings_reach_the_token_provider() -> None:
    config = ClusterConfig(**{**OAUTH, "sasl_oauth_token_endpoint_url": "http://127.0.0.1:8443/token",
                              "sasl_oauth_scope": "kafka", "sasl_oauth_extensions": {"logicalCluster": "lkc-1"}})
    oauth = ClusterConnectionSettings.from_config(config).oauth
    assert oauth is not None
    assert (oauth.token_endpoint_url, oauth.client_id, oauth.client_secret_env, oauth.scope, dict(oauth.extensions)) \
        == ("http://127.0.0.1:8443/token", "txnwatch", "IDP_SECRET", "kafka", {"logicalCluster": "lkc-1"})


GSSAPI: dict[str, Any] = dict(name="krb", bootstrap_servers=["kafka1.corp:9094"], security_protocol="SASL_SSL",
                              sasl_mechanism="GSSAPI", sasl_kerberos_service_name="kafka-prod",
                              sasl_kerberos_domain_name="kafka.corp")


def test_gssapi_without_its_bindings_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gssapi" else real(name, *a))
    with pytest.raises(ValueError, match=r"txnwatch\[kerberos\]"):
        ClusterConfig(**GSSAPI)


def test_gssapi_names_reach_kafka_python(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "gssapi" else real(name, *a))
    config = ClusterConnectionSettings.from_config(ClusterConfig(**GSSAPI)).client_config()
    assert (config["sasl_mechanism"], config["sasl_kerberos_service_name"], config["sasl_kerberos_domain_name"]) \
        == ("GSSAPI", "kafka-prod", "kafka.corp")
    assert config["sasl_oauth_token_provider"] is None
    # kafka-python builds the broker principal from these (kafka-prod@kafka.corp, a host-based service) once the
    # gssapi bindings are there; without them its mechanism says so.
    from kafka.net.sasl import get_sasl_mechanism
    with pytest.raises(RuntimeError, match="GSSAPI lib not found"):
        get_sasl_mechanism("GSSAPI")(host="kafka1.corp", **config)
