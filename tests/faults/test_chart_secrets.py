"""Secret bytes reach txnwatch through the Helm chart unchanged (issue 15, defect 3).

The old chart spliced each SASL password into a JSON string in TXNWATCH_CLUSTERS: a ``"``
or ``\\`` stopped the daemon with a traceback and ``\\u0022`` silently became ``"``.  Now the
chart mounts the Secret's keys as files and the config names the file.  The SASL login with
such a password against a real broker is in tests/kafka/test_secure_connections.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deploy.tools import pod_settings, render_chart

HOSTILE = "\"\\{}$'" + "ü€😀 \\u0022 $(HOME) ${X} {{ .Values }} %s\t,=]"

CASES = [
    pytest.param(HOSTILE, id="quotes-backslash-braces-dollar-unicode"),
    pytest.param('"\\{}$\'', id="the-issue-s-five-characters"),
    pytest.param("\\u0022", id="json-escape-lookalike"),
    pytest.param("  leading and trailing spaces  ", id="spaces"),
    pytest.param("line\nbreak", id="newline"),
    pytest.param("-: #&*!|>'\"%@`", id="yaml-indicators"),
]


def token(password: str, suffix: str) -> str:
    """The password's visible-ASCII characters: API tokens may hold no others (txnwatch.core.config.token_problem)."""
    return "".join(ch for ch in password if "!" <= ch <= "~") + suffix


def values(password: str) -> dict[str, object]:
    return {
        "config": {"clusters": [
            {"name": "plain", "bootstrap_servers": ["k:9092"], "security_protocol": "SASL_PLAINTEXT",
             "sasl_mechanism": "PLAIN", "sasl_username": "txnwatch"},
            {"name": "scram.eu-1", "bootstrap_servers": ["k:9093"], "security_protocol": "SASL_SSL",
             "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "u\"s'er"},
            {"name": "open", "bootstrap_servers": ["k:9094"]},
        ]},
        "secrets": {"databaseUrl": "postgresql+psycopg://u:p@db:5432/x", "saslPasswords": {
            "plain": password, "scram.eu-1": password[::-1]},
            "apiReadToken": token(password, "-r"), "apiAdminToken": token(password, "-a"),
            "pagerdutyRoutingKey": password},
    }


@pytest.mark.parametrize("password", CASES)
def test_secrets_round_trip_through_the_chart(password: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    docs = render_chart(values(password), tmp_path)
    settings = pod_settings(docs, tmp_path, monkeypatch)
    clusters = {c.name: c for c in settings.clusters}
    assert clusters["plain"].sasl_password.get_secret_value() == password
    assert clusters["scram.eu-1"].sasl_password.get_secret_value() == password[::-1]
    assert clusters["scram.eu-1"].sasl_username == "u\"s'er"
    assert clusters["open"].sasl_password is None
    assert settings.api.read_token.get_secret_value() == token(password, "-r")
    assert settings.api.admin_token.get_secret_value() == token(password, "-a")
    assert settings.pagerduty.routing_key.get_secret_value() == password


def test_no_secret_is_spliced_into_config_or_environment(tmp_path: Path) -> None:
    docs = render_chart(values(HOSTILE), tmp_path)
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    env = deploy["spec"]["template"]["spec"]["containers"][0]["env"]
    assert all("value" not in e or "$(" not in e["value"] for e in env), "a secret is spliced into an env value"
    assert "TXNWATCH_CLUSTERS" not in {e["name"] for e in env}
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})]
    assert "ü€😀" not in cm["data"]["config.yaml"]


def test_password_file_problems_are_one_clear_line(tmp_path: Path) -> None:
    from txnwatch.core.config import ConfigError, load_settings

    cluster = {"name": "c", "bootstrap_servers": "k:1", "security_protocol": "SASL_PLAINTEXT",
               "sasl_mechanism": "PLAIN", "sasl_username": "u"}
    with pytest.raises(ConfigError, match=r"clusters\.0: .*sasl_password_file .*cannot read"):
        load_settings(None, clusters=[dict(cluster, sasl_password_file=str(tmp_path / "missing"))])
    (tmp_path / "bin").write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_settings(None, clusters=[dict(cluster, sasl_password_file=str(tmp_path / "bin"))])
    (tmp_path / "pw").write_text("x")
    with pytest.raises(ConfigError, match="not both"):
        load_settings(None, clusters=[dict(cluster, sasl_password_file=str(tmp_path / "pw"), sasl_password="y")])


def test_metrics_scrape_sends_the_read_token_and_the_pod_is_fenced(tmp_path: Path) -> None:
    """Issue 15, defect 4 in the chart: the ServiceMonitor authenticates, NetworkPolicy and PDB exist,
    and the default keeps SQLite (alerts, outbox) on a volume that survives a restart."""
    docs = render_chart({"secrets": {"apiReadToken": "t"}}, tmp_path)
    (monitor,) = [d for d in docs if d["kind"] == "ServiceMonitor"]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["authorization"]["type"] == "Bearer"
    assert endpoint["authorization"]["credentials"]["key"] == "api-read-token"
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"][0]["ports"][0]["port"] == "http"
    assert [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    (pvc,) = [d for d in docs if d["kind"] == "PersistentVolumeClaim"]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert deploy["spec"]["strategy"]["type"] == "Recreate"
    postgres = render_chart({"secrets": {"databaseUrl": "postgresql+psycopg://u:p@db/x"}}, tmp_path)
    assert not [d for d in postgres if d["kind"] == "PersistentVolumeClaim"]
