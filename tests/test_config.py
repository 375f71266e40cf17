"""Configuration: YAML + env precedence, and one clear line for every mistake."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from txnwatch.core.config import ConfigError, load_settings

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_example_config_is_valid() -> None:
    settings = load_settings(ROOT / "config" / "example.yaml")
    assert settings.clusters[0].name == "lab"
    assert settings.poll_interval_seconds == 15
    assert settings.transaction_log.busy_commit_ms == 250  # the default, written out in the example
    assert settings.transaction_log.fetch_wait_ms == 2000  # likewise


def test_env_overrides_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, "poll_interval_seconds: 30\napi:\n  port: 9000\n  host: 0.0.0.0\n")
    monkeypatch.setenv("TXNWATCH_API__PORT", "9100")
    settings = load_settings(path)
    assert settings.api.port == 9100
    assert settings.api.host == "0.0.0.0"
    assert settings.poll_interval_seconds == 30


def test_config_env_var_names_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXNWATCH_CONFIG", str(write(tmp_path, "poll_interval_seconds: 42\n")))
    assert load_settings().poll_interval_seconds == 42


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bogus: 1\n", "bogus: unknown option"),
        ("poll_interval_seconds: soon\n", "poll_interval_seconds: Input should be a valid number"),
        ("poll_interval_seconds: 0\n", "poll_interval_seconds: Input should be greater than or equal to 1"),
        ("database_url: mysql://h/db\n", "database_url: scheme 'mysql' is not supported"),
        ("clusters:\n  - name: a\n    bootstrap_servers: nohost\n", "clusters.0.bootstrap_servers: Value error, 'nohost' is not host:port"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1'}\n  - {name: a, bootstrap_servers: 'h:2'}\n", "duplicate cluster names: a"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', security_protocol: SASL_SSL}\n", "needs sasl_mechanism"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', topics_include: ['(']}\n", "invalid regular expression"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', groups_include: ['orders-(']}\n",
         "clusters.0.groups_include: invalid regular expression 'orders-('"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', groups_exclude: ['[a-']}\n",
         "clusters.0.groups_exclude: invalid regular expression '[a-'"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', transactional_id_pattern: '(?i)team-a-.*'}\n",
         "clusters.0.transactional_id_pattern: transactional_id_pattern '(?i)team-a-.*' uses '(?i'"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', transactional_id_pattern: '[[:alpha:]]+'}\n",
         "POSIX or nested classes differ between RE2/J and Python"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', max_groups: -1}\n",
         "clusters.0.max_groups: Input should be greater than or equal to 0"),
        ("lag_sample_interval_seconds: -5\n", "lag_sample_interval_seconds: Input should be greater than or equal to 0"),
        ("console: {session_lifetime_seconds: 0}\n",
         "console.session_lifetime_seconds: Input should be greater than 0"),
        ("console: {session_lifetime_seconds: -60}\n",
         "console.session_lifetime_seconds: Input should be greater than 0 (got -60)"),
        ("console: {session_lifetime_seconds: 31536000}\n",
         "console.session_lifetime_seconds: Input should be less than or equal to 604800 (got 31536000)"),
        ("console: {session_lifetime_seconds: 12h}\n", "console.session_lifetime_seconds: Input should be a valid integer"),
        ("offset_sample_interval_seconds: -1\n",
         "offset_sample_interval_seconds: Input should be greater than or equal to 0"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', offset_sample_interval_seconds: 90000}\n",
         "clusters.0.offset_sample_interval_seconds: Input should be less than or equal to 86400"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', broker_metrics_urls: {'1': 'kafka-1:7071'}}\n",
         "broker '1': 'kafka-1:7071' is not an http(s) URL"),
        ("clusters:\n  - {name: a, bootstrap_servers: 'h:1', broker_metrics_url_template: 'http://{rack}:7071/'}\n",
         "only {host} and {node_id} can be filled in"),
        ("transaction_log: {busy_commit_ms: 5}\n",
         "transaction_log.busy_commit_ms: Input should be greater than or equal to 20"),
        ("transaction_log: {busy_commit_ms: 5000}\n",
         "transaction_log.busy_commit_ms: Input should be less than or equal to 1000"),
        ("transaction_log: {fetch_wait_ms: 0}\n",
         "transaction_log.fetch_wait_ms: Input should be greater than or equal to 100"),
        ("transaction_log: {fetch_wait_ms: 60000}\n",
         "transaction_log.fetch_wait_ms: Input should be less than or equal to 10000"),
        ("api: {admin_enabled: true}\n", "admin_enabled needs admin_token"),
        ("pagerduty: {enabled: true}\n", "enabled needs routing_key"),
        ("- just\n- a list\n", "top level must be a mapping"),
        ("a: [unclosed\n", "not valid YAML (line"),
    ],
)
def test_bad_config_one_clear_line(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, text))
    message = str(err.value)
    assert expected.replace("Value error, ", "") in message
    assert "\n" not in message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "nope.yaml")


def test_secrets_are_not_printed(tmp_path: Path) -> None:
    path = write(tmp_path, "pagerduty: {enabled: true, routing_key: s3cr3t-key}\n")
    settings = load_settings(path)
    assert "s3cr3t-key" not in repr(settings)
    assert settings.pagerduty.routing_key is not None
    assert settings.pagerduty.routing_key.get_secret_value() == "s3cr3t-key"


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "txnwatch", *args], capture_output=True, text=True, timeout=60, env=env)


def test_cli_config_check_ok() -> None:
    result = run_cli("config", "check", str(ROOT / "config" / "example.yaml"))
    assert result.returncode == 0, result.stderr
    assert "OK" in result.stdout


def test_cli_config_check_bad_group_regex_is_one_line(tmp_path: Path) -> None:
    config = "clusters:\n  - {name: a, bootstrap_servers: 'h:1', groups_include: ['(orders']}\n"
    result = run_cli("config", "check", str(write(tmp_path, config)))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "groups_include" in line]
    assert "invalid regular expression '(orders'" in line


def test_cli_config_check_refuses_a_java_only_id_pattern_in_one_line(tmp_path: Path) -> None:
    config = "clusters:\n  - {name: a, bootstrap_servers: 'h:1', transactional_id_pattern: 'a\\p{L}+'}\n"
    result = run_cli("config", "check", str(write(tmp_path, config)))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = [line for line in result.stderr.splitlines() if "transactional_id_pattern" in line]
    assert "uses the escape \\p" in line


def test_cli_bad_config_exits_2_without_traceback(tmp_path: Path) -> None:
    result = run_cli("config", "check", str(write(tmp_path, "clusters:\n  - name: a\n    bootstrap: x\n")))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 2 and all("clusters.0.bootstrap" in line for line in lines), result.stderr
    assert "did you mean 'bootstrap_servers'?" in result.stderr


def test_cli_run_bad_config_exits_2(tmp_path: Path) -> None:
    result = run_cli("run", "--config", str(write(tmp_path, "database_url: oracle://x\n")))
    assert result.returncode == 2
    assert "database_url" in result.stderr and "Traceback" not in result.stderr


ELEVEN_MISTAKES = """\
database_url: mysql://h/db
poll_interval_seconds: 0
log_level: LOUD
log_format: xml
bogus: 1
api:
  port: 99999
  hots: 0.0.0.0
clusters:
  - name: "bad name!"
    bootstrap_servers: nohost
  - name: b
    bootstrap_servers: "h:1"
    security_protocol: TLS
retention:
  days: -1
"""


def test_config_check_prints_every_mistake_on_its_own_line(tmp_path: Path) -> None:
    path = write(tmp_path, ELEVEN_MISTAKES)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    result = run_cli("config", "check", str(path), env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 11, result.stderr
    keys = [line.split(": ")[2] for line in lines]
    assert sorted(keys) == sorted(["database_url", "poll_interval_seconds", "log_level", "log_format", "bogus",
                                   "api.port", "api.hots", "clusters.0.name", "clusters.0.bootstrap_servers",
                                   "clusters.1.security_protocol", "retention.days"])
    assert all(line.startswith(f"txnwatch: {path}: ") for line in lines)
    by_key = dict(zip(keys, lines, strict=False))
    assert "'text' or 'json'" in by_key["log_format"]  # what is allowed
    assert "did you mean 'host'?" in by_key["api.hots"]
    assert "allowed here: " in by_key["bogus"] and "clusters" in by_key["bogus"].split("allowed here: ")[1]


def test_environment_mistakes_name_their_variable_and_malformed_json_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    env.update(TXNWATCH_CLUSTERS='[{"name": "a", bootstrap_servers', TXNWATCH_API__PORT="eighty",
               TXNWATCH_LOG_LEVEL="LOUD")
    result = run_cli("config", "check", str(write(tmp_path, "poll_interval_seconds: 0\n")), env=env)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 4, result.stderr
    joined = "\n".join(lines)
    assert "environment TXNWATCH_CLUSTERS: clusters: not valid JSON" in joined and "expected a JSON list" in joined
    assert "environment TXNWATCH_API__PORT: api.port: " in joined
    assert "environment TXNWATCH_LOG_LEVEL: log_level: " in joined
    assert f"{tmp_path / 'c.yaml'}: poll_interval_seconds: " in joined


def test_secret_values_are_not_echoed_in_problems(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(write(tmp_path, "pagerduty: {enabled: true, routing_key: [s3cr3t]}\n"))
    assert "s3cr3t" not in str(err.value)


def test_the_canary_is_off_by_default_and_its_id_is_stable_per_cluster() -> None:
    settings = load_settings(None, clusters=[dict(name="prod", bootstrap_servers="k:9092"),
                                             dict(name="dr", bootstrap_servers="k:9092",
                                                  canary=dict(enabled=True, transactional_id="ours"))])
    prod, dr = settings.clusters
    assert not prod.canary.enabled and prod.canary.topic == "_txnwatch_canary"
    assert prod.canary.transactional_id_for("prod") == "txnwatch-canary-prod"
    assert dr.canary.enabled and dr.canary.transactional_id_for("dr") == "ours"


@pytest.mark.parametrize(("canary", "message"), [
    pytest.param({"topic": "bad topic"}, "clusters.0.canary.topic: must be 1-249 characters", id="topic-name"),
    pytest.param({"transactional_id": "  "}, "clusters.0.canary.transactional_id: must be printable", id="blank-id"),
    pytest.param({"interval_seconds": 0}, "clusters.0.canary.interval_seconds: Input should be greater than or "
                 "equal to 1", id="interval"),
    pytest.param({"enable": True}, "clusters.0.canary.enable: unknown option; did you mean 'enabled'?", id="typo"),
])
def test_canary_mistakes_are_one_line_each(canary: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(None, clusters=[dict(name="prod", bootstrap_servers="k:9092", canary=canary)])
    assert any(message in problem for problem in caught.value.problems), caught.value.problems


def test_the_demo_shows_the_canary() -> None:
    from txnwatch.cli.demo import demo_overrides

    settings = load_settings(None, **demo_overrides("127.0.0.1:9092", 8080, Path("var/demo")))
    assert settings.clusters[0].canary.enabled
    assert settings.alert_rules["transactions_cannot_commit"].for_seconds == 10
