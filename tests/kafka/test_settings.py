"""Connection settings: topic selection and what reaches kafka-python."""

from __future__ import annotations

import re

import pytest

from txnwatch.kafka import ClusterConnectionSettings


def settings(**kw: object) -> ClusterConnectionSettings:
    return ClusterConnectionSettings(name="prod", bootstrap_servers=("k1:9092",), **kw)  # type: ignore[arg-type]  # keyword overrides of any field, checked by the settings themselves


def test_every_non_internal_topic_by_default() -> None:
    s = settings()
    assert s.watches("orders") and s.watches("__weird_but_user_made")
    assert not s.watches("__consumer_offsets", internal=True)


def test_patterns_match_whole_names_like_kafka_tools() -> None:
    s = settings(topics_include=("orders", r"payments\..*"), topics_exclude=(r".*\.dlq",))
    assert s.watches("orders") and s.watches("payments.eu")
    assert not s.watches("orders2") and not s.watches("payments.eu.dlq") and not s.watches("audit")


def test_config_style_anchored_patterns_work_too() -> None:
    s = settings(topics_include=(".*",), topics_exclude=("^__.*",))
    assert s.watches("orders") and not s.watches("__tmp")


def test_bad_pattern_fails_at_construction() -> None:
    with pytest.raises(re.error):
        settings(topics_include=("(",))


def test_comma_separated_servers() -> None:
    s = ClusterConnectionSettings(name="x", bootstrap_servers="a:1, b:2")  # type: ignore[arg-type]  # a comma-separated string is accepted and split, as the config file gives it
    assert s.bootstrap_servers == ("a:1", "b:2")


@pytest.mark.parametrize("kw", [
    {"security_protocol": "SASL_SSL"},
    {"sasl_mechanism": "PLAIN"},
    {"request_timeout_ms": 0},
])
def test_inconsistent_settings_are_refused(kw: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        settings(**kw)


def test_sasl_and_ssl_reach_the_client() -> None:
    s = settings(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="watch",
                 sasl_password="s3cret", ssl_cafile="/ca.pem", ssl_certfile="/c.pem", ssl_keyfile="/k.pem",
                 ssl_check_hostname=False, request_timeout_ms=4000)
    config = s.client_config()
    assert config["bootstrap_servers"] == ["k1:9092"]
    assert (config["security_protocol"], config["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("watch", "s3cret")
    assert (config["ssl_cafile"], config["ssl_certfile"], config["ssl_keyfile"]) == ("/ca.pem", "/c.pem", "/k.pem")
    assert config["ssl_check_hostname"] is False and config["request_timeout_ms"] == 4000
    assert "s3cret" not in repr(s)


def test_from_service_config() -> None:
    from txnwatch.core.config import ClusterConfig

    config = ClusterConfig(name="prod", bootstrap_servers=["k1:9092", "k2:9092"], security_protocol="SASL_PLAINTEXT",
                           sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p", ssl_cafile="/ca.pem")
    s = ClusterConnectionSettings.from_config(config)
    assert s.bootstrap_servers == ("k1:9092", "k2:9092") and s.sasl_password == "p" and s.ssl_cafile == "/ca.pem"
    assert s.watches("orders") and not s.watches("__consumer_offsets")


def test_big_cluster_answers_are_accepted() -> None:
    """The Metadata answer of a lab cluster with 80,000 partitions was 2,148,861 bytes; kafka-python's connection
    manager refuses frames over 1 MB unless told otherwise, and every poll of that cluster failed."""
    import struct

    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.selector import NetworkSelector
    from kafka.protocol.parser import KafkaProtocol

    s = settings()
    manager = KafkaConnectionManager(NetworkSelector(client_id=s.client_id), **s.client_config())
    parser = KafkaProtocol(client_id=s.client_id,
                           receive_message_max_bytes=manager.config["receive_message_max_bytes"])
    assert parser.receive_bytes(struct.pack(">i", 2_148_861)) == []  # a frame header: waits for the rest
