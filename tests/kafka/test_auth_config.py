"""Configuration of OAUTHBEARER, GSSAPI and AWS_MSK_IAM: what is accepted, what is refused and why.

GSSAPI against a real KDC and broker is tests/kafka/test_kerberos.py; this pins, without one, the
configuration path up to the GSSAPI mechanism (names, principal and keytab reach it, one identity per
cluster), every configuration mistake as one line of `config check`, and a missing gssapi package as a
configuration error, not a crash at connect.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from kafka.errors import KafkaConfigurationError

from txnwatch.core.config import ClusterConfig, ConfigError, load_settings
from txnwatch.kafka.kerberos import NO_BINDINGS, KerberosIdentity, KerberosMechanism, explain
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


@pytest.fixture
def gssapi_installed() -> None:
    """The kerberos extra: scripts/bootstrap.sh --test installs it (it builds against Debian's libkrb5-dev)."""
    pytest.importorskip("gssapi", reason="the kerberos extra is not installed (scripts/bootstrap.sh --test)")


def _keytab(directory: Path) -> Path:
    """A file that starts as a keytab does (config check reads no further)."""
    path = directory / "txnwatch.keytab"
    path.write_bytes(b"\x05\x02" + bytes(40))
    return path


def test_gssapi_without_its_bindings_is_a_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gssapi" else real(name, *a))
    with pytest.raises(ValueError, match=r"txnwatch\[kerberos\]"):
        ClusterConfig(**GSSAPI)


def test_gssapi_settings_reach_kafka_python_and_the_cluster_s_own_identity(tmp_path: Path, gssapi_installed: None) -> None:
    keytab = _keytab(tmp_path)
    settings = ClusterConnectionSettings.from_config(ClusterConfig(
        **GSSAPI, sasl_kerberos_principal="txnwatch@CORP.EXAMPLE", sasl_kerberos_keytab=str(keytab)))
    config = settings.client_config()
    assert (config["sasl_mechanism"], config["sasl_kerberos_service_name"], config["sasl_kerberos_domain_name"]) \
        == ("GSSAPI", "kafka-prod", "kafka.corp")
    identity = config["sasl_oauth_token_provider"]
    assert isinstance(identity, KerberosIdentity) and identity is settings.sasl_provider
    assert (identity.principal, identity.keytab) == ("txnwatch@CORP.EXAMPLE", str(keytab))
    # Every connection of the cluster shares the identity (and its ticket cache); another cluster has its own.
    other = ClusterConnectionSettings.from_config(ClusterConfig(
        **{**GSSAPI, "name": "krb2"}, sasl_kerberos_principal="txnwatch@OTHER.EXAMPLE", sasl_kerberos_keytab=str(keytab)))
    assert isinstance(other.sasl_provider, KerberosIdentity) and other.sasl_provider.ccache != identity.ccache
    # kafka-python builds the GSSAPI exchange with txnwatch's mechanism, which reads the identity.
    from kafka.net.sasl import get_sasl_mechanism
    assert get_sasl_mechanism("GSSAPI") is KerberosMechanism


def test_without_the_bindings_the_mechanism_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi now raises ImportError
    identity = KerberosIdentity(principal="txnwatch@CORP.EXAMPLE")
    with pytest.raises(KafkaConfigurationError, match=r"pip install 'txnwatch\[kerberos\]'"):
        KerberosMechanism(host="kafka1.corp", sasl_kerberos_service_name="kafka", sasl_oauth_token_provider=identity)
    assert identity.last_error == NO_BINDINGS  # what the connection adds to its "bootstrap failed" line


# What `txnwatch config check` says for each mistake (a KDC is not needed to find them).
KERBEROS_MISTAKES = [
    pytest.param({"sasl_kerberos_principal": "txnwatch", "sasl_kerberos_keytab": "{keytab}"},
                 r"clusters\.0\.sasl_kerberos_principal: 'txnwatch' has no realm: write it as txnwatch@REALM",
                 id="principal-without-realm"),
    pytest.param({"sasl_kerberos_principal": "txnwatch@"}, r"'txnwatch@' is not name@REALM", id="empty-realm"),
    pytest.param({"sasl_kerberos_principal": "t@CORP", "sasl_kerberos_keytab": "{dir}/missing.keytab"},
                 r"clusters\.0\.sasl_kerberos_keytab: cannot read '.*missing\.keytab': No such file or directory",
                 id="keytab-missing"),
    pytest.param({"sasl_kerberos_principal": "t@CORP", "sasl_kerberos_keytab": "{dir}"},
                 r"sasl_kerberos_keytab: cannot read '.*': Is a directory", id="keytab-unreadable"),
    pytest.param({"sasl_kerberos_principal": "t@CORP", "sasl_kerberos_keytab": "{dir}/password.txt"},
                 r"'.*password\.txt' is not a keytab \(it does not start with the bytes 05 02", id="not-a-keytab"),
    pytest.param({"sasl_kerberos_keytab": "{keytab}"},
                 r"clusters\.0: sasl_kerberos_keytab needs sasl_kerberos_principal", id="keytab-without-principal"),
    pytest.param({"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "u", "sasl_password": "p",
                  "sasl_kerberos_principal": "t@CORP"},
                 r"sasl_kerberos_principal is for sasl_mechanism GSSAPI, not SCRAM-SHA-512", id="with-scram"),
    pytest.param({"security_protocol": "SSL", "sasl_mechanism": None, "sasl_kerberos_keytab": "{keytab}",
                  "sasl_kerberos_principal": "t@CORP"},
                 r"sasl_kerberos_principal/sasl_kerberos_keytab are for sasl_mechanism GSSAPI, not SSL",
                 id="without-sasl"),
]


@pytest.mark.parametrize(("changes", "line"), KERBEROS_MISTAKES)
def test_kerberos_mistakes_are_one_line_of_config_check(changes: dict[str, Any], line: str, tmp_path: Path,
                                                        gssapi_installed: None) -> None:
    keytab = _keytab(tmp_path)
    (tmp_path / "password.txt").write_text("hunter2")
    filled = {k: v.format(keytab=keytab, dir=tmp_path) if isinstance(v, str) else v for k, v in changes.items()}
    with pytest.raises(ConfigError) as refused:
        load_settings(None, clusters=[{**GSSAPI, **filled}])
    (problem,) = refused.value.problems
    assert re.search(line, problem), problem


@pytest.mark.parametrize(("major", "minor", "says"), [
    pytest.param(0xD0000, -1765328347, "this host's clock and the KDC's differ too much", id="clock-skew"),
    pytest.param(0xD0000, -1765328230, "names no KDC for the realm", id="realm-not-in-krb5-conf"),
    pytest.param(11 << 16, 0, "the ticket of txnwatch@CORP in the keytab /k/t.keytab has expired",
                 id="credentials-expired"),
    pytest.param(0xD0000, 12345, "getting a ticket for kafka/b1.corp failed", id="anything-else"),
])
def test_gss_failures_the_lab_does_not_meet_still_say_what_to_check(major: int, minor: int, says: str,
                                                                     gssapi_installed: None) -> None:
    """The lab test (tests/kafka/test_kerberos.py) meets the common failures on a real KDC; these are the rest."""
    from gssapi.raw.misc import GSSError

    line = explain(GSSError(major, minor & 0xFFFFFFFF), KerberosIdentity(principal="txnwatch@CORP",
                                                                          keytab="/k/t.keytab"), "kafka@b1.corp")
    assert line.startswith("login as txnwatch@CORP failed: ") and says in line and "\n" not in line, line


def test_config_check_prints_a_missing_keytab_as_one_line(tmp_path: Path) -> None:
    from tests.test_config import run_cli

    missing = tmp_path / "keytab-corp"
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"clusters": [{**GSSAPI, "sasl_kerberos_principal": "txnwatch@CORP.EXAMPLE",
                                                    "sasl_kerberos_keytab": str(missing)}]}))
    result = run_cli("config", "check", str(config))
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"txnwatch: {config}: clusters.0.sasl_kerberos_keytab: cannot read '{missing}': No such file or directory"]
