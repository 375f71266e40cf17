"""The lab on Kafka 4 defaults with Kafka's own Java transactional producer, and the tools-version plumbing.

The Java producer committing with epoch bumps and being fenced by a second instance is exercised end to end,
against DumpLogSegments, in tests/e2e/test_kafka_versions_history.py."""

from __future__ import annotations

import pytest

from txnwatch.lab import jars
from txnwatch.lab.errors import LabError
from txnwatch.lab.java_clients import JavaProducerSpec


def _fake_cache(tmp_path, monkeypatch, *versions: str, tools: bool = True) -> list[str]:
    """A jar cache of ``versions`` resolved whole (with their own kafka-tools jar unless not ``tools``); returns the
    list the fake Maven appends each version it is asked to resolve to."""
    monkeypatch.setenv("TXNWATCH_LAB_CACHE", str(tmp_path))
    for version in versions:
        (tmp_path / version).mkdir()
        (tmp_path / version / ".complete").write_text(version)
        if tools:
            (tmp_path / version / f"kafka-tools-{version}.jar").write_bytes(b"")
    resolved: list[str] = []
    monkeypatch.setattr(jars, "_download", lambda version, target, quiet: resolved.append(version))
    return resolved


@pytest.mark.parametrize("version", [jars.OLDER_KAFKA_VERSION, jars.DEFAULT_KAFKA_VERSION, jars.NEWEST_KAFKA_VERSION])
def test_every_covered_release_runs_its_own_tools(tmp_path, monkeypatch, version):
    resolved = _fake_cache(tmp_path, monkeypatch, version, "4.3.1")
    assert version not in jars.TOOLS_FALLBACK  # Maven Central serves kafka-tools for each
    assert jars.tools_version(version) == version
    assert jars.resolve_tools_jars(version) == tmp_path / version
    assert resolved == []


def test_a_release_without_tools_on_maven_central_runs_the_fallbacks(tmp_path, monkeypatch):
    resolved = _fake_cache(tmp_path, monkeypatch, "9.8.0")
    monkeypatch.setitem(jars.TOOLS_FALLBACK, "9.9.0", "9.8.0")
    assert jars.tools_version("9.9.0") == "9.8.0"
    assert jars.resolve_tools_jars("9.9.0") == tmp_path / "9.8.0"
    assert resolved == []


def test_a_cache_resolved_without_its_tools_is_resolved_again(tmp_path, monkeypatch):
    """4.4.0 caches made while Maven Central served no kafka-tools 4.4.0 hold the brokers alone."""
    resolved = _fake_cache(tmp_path, monkeypatch, "4.4.0", tools=False)
    assert jars.resolve_kafka_jars("4.4.0") == tmp_path / "4.4.0"
    assert resolved == ["4.4.0"]
    monkeypatch.setitem(jars.TOOLS_FALLBACK, "4.4.0", "4.3.1")  # brokers alone are whole for a listed release
    assert jars.resolve_kafka_jars("4.4.0") == tmp_path / "4.4.0"
    assert resolved == ["4.4.0"]


def test_producer_performance_command(tmp_path, monkeypatch):
    _fake_cache(tmp_path, monkeypatch, "4.4.0")
    spec = JavaProducerSpec("tx-java", "orders", transaction_duration_ms=500, records_per_second=20, duration_s=30,
                            transaction_timeout_ms=9000)
    cmd = spec.command("127.0.0.1:9092", "4.4.0")
    assert cmd[cmd.index("-cp") + 1] == str(tmp_path / "4.4.0" / "*")
    main = cmd.index("org.apache.kafka.tools.ProducerPerformance")
    options = cmd[main + 1:cmd.index("--producer-props")]
    args = dict(zip(options[::2], options[1::2], strict=True))
    assert (args["--transactional-id"], args["--transaction-duration-ms"], args["--num-records"],
            args["--throughput"]) == ("tx-java", "500", "600", "20")
    props = cmd[cmd.index("--producer-props") + 1:]
    assert "transaction.timeout.ms=9000" in props and "bootstrap.servers=127.0.0.1:9092" in props


def test_spec_rejects_nonsense():
    with pytest.raises(ValueError, match="must be positive"):
        JavaProducerSpec("t", "x", transaction_duration_ms=0)
    assert JavaProducerSpec("t", "x", duration_s=None).num_records > 10**15  # runs until stopped


@pytest.mark.lab
@pytest.mark.slow
def test_kafka4_defaults_reject_what_pre_kip_890_accepts(kafka4_lab, new_topic_on):
    """Verification on: the raw transactional write that makes a hanging transaction is refused."""
    from txnwatch.lab.faults import inject_hanging_transaction
    from txnwatch.lab.jars import kafka_major
    from txnwatch.lab.reference import finalized_features

    topic = new_topic_on(kafka4_lab)
    features = finalized_features(kafka4_lab.bootstrap_servers, kafka4_lab.kafka_version)
    assert features["transaction.version"] == (2 if kafka_major(kafka4_lab.kafka_version) >= 4 else 0)
    with pytest.raises(LabError, match="verification"):
        inject_hanging_transaction(kafka4_lab.bootstrap_servers, topic, 0)


@pytest.mark.lab
@pytest.mark.slow
def test_the_brokers_jmx_exporter_reports_kip_890_verification(kafka4_lab, java_producer, new_topic_on):
    """Verification on: every transaction's first write to a partition is verified with the coordinator, and the
    broker's own AddPartitionsToTxnManager MBeans count it, read through the JMX exporter agent."""
    from txnwatch.kafka.broker_metrics import scrape

    topic = new_topic_on(kafka4_lab)
    urls = {str(k): v for k, v in kafka4_lab.broker_metrics_urls().items()}
    assert list(urls) == [str(b.node_id) for b in kafka4_lab.brokers]
    (before,) = scrape(urls, 5_000)
    assert before.ok, before.error
    producer = java_producer("lab4-java-verified", topic, duration_s=3)
    assert producer.wait(90) == 0, producer.output()[-2000:]
    (after,) = scrape(urls, 5_000)
    assert after.ok and after.verifications is not None and before.verifications is not None
    assert after.verifications > before.verifications  # ~2 transactions a second, each verified once
    assert after.failures == before.failures  # a healthy producer: nothing refused (a fenced one would be)
    assert after.time_ms_max is not None and after.time_ms_max >= dict(after.time_ms_quantiles)[0.5] > 0
