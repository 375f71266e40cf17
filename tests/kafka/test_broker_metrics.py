"""The brokers' own KIP-890 figures from their JMX exporters: parsing real exporter output (captured from lab
brokers with the lab's Kafka rules on 4.1.1 and with the exporter's default naming on 3.9.1) and scraping real
HTTP endpoints that misbehave."""

from __future__ import annotations

import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tests.fixtures.http_stub import serving
from txnwatch.core.model import BrokerInfo
from txnwatch.kafka.broker_metrics import expand_urls, parse_exporter_text, scrape

DATA = Path(__file__).with_name("data")


def _sample(text: str, needle: str) -> float:
    """A value straight from the text, as a cross-check that does not go through the parser."""
    (line,) = [ln for ln in text.splitlines() if ln.startswith(needle)]
    return float(line.rsplit(" ", 1)[1])


def test_the_kafka_rules_naming():
    text = (DATA / "jmx-exporter-kafka-rules-4.1.1.txt").read_text()
    figures = parse_exporter_text("1", "http://b1/metrics", text)
    assert figures.ok and figures.broker == "1"
    assert figures.verifications == _sample(text, "kafka_server_addpartitionstotxnmanager_verificationtimems_count")
    assert figures.verifications == 14 and figures.failures == 0
    assert figures.time_ms_max == _sample(text, "kafka_server_addpartitionstotxnmanager_verificationtimems_max")
    assert figures.time_ms_mean == pytest.approx(3.7857, abs=1e-3)
    assert dict(figures.time_ms_quantiles)[0.99] == 16.0 and dict(figures.time_ms_quantiles)[0.5] == 3.0
    assert [q for q, _ in figures.time_ms_quantiles] == [0.5, 0.75, 0.95, 0.98, 0.99, 0.999]
    assert figures.failures_per_second_1m == 0.0


def test_the_exporters_default_naming():
    text = (DATA / "jmx-exporter-default-3.9.1.txt").read_text()
    figures = parse_exporter_text("b-1", "http://b1/metrics", text)
    assert figures.ok
    assert (figures.verifications, figures.failures, figures.time_ms_max) == (14, 0, 11.0)
    assert dict(figures.time_ms_quantiles) == {0.5: 1.0, 0.75: 3.0, 0.95: 11.0, 0.98: 11.0, 0.99: 11.0, 0.999: 11.0}
    assert figures.time_ms_mean == pytest.approx(2.2143, abs=1e-3)


@pytest.mark.parametrize(("text", "reason"), [
    pytest.param("# TYPE up gauge\nup 1\n", "no AddPartitionsToTxnManager", id="mbeans-absent"),
    pytest.param("this is { not prometheus", "not Prometheus", id="garbage"),
])
def test_unusable_output_is_an_error_not_zeros(text, reason):
    figures = parse_exporter_text("1", "u", text)
    assert not figures.ok and reason in (figures.error or "")
    assert figures.verifications is None and figures.failures is None


def test_urls_explicit_and_from_a_template():
    brokers = [BrokerInfo(1, "kafka-1.example", 9092), BrokerInfo(2, "kafka-2.example", 9092)]
    assert expand_urls("http://{host}:7071/metrics", {"2": "http://override/metrics"}, brokers) == {
        "1": "http://kafka-1.example:7071/metrics", "2": "http://override/metrics"}
    assert expand_urls(None, {"a": "http://x/metrics"}, brokers) == {"a": "http://x/metrics"}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(3)
        status = 500 if self.path == "/broken" else 200
        body = (DATA / "jmx-exporter-default-3.9.1.txt").read_bytes() if status == 200 else b"oops"
        try:
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except BrokenPipeError:  # the slow one: the client gave up, as it should
            pass

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def exporter():
    with serving(_Handler) as url:
        yield url


def test_scrape_keeps_going_past_brokers_that_fail(exporter):
    from txnwatch.lab.ports import free_ports

    (closed,) = free_ports(1)
    started = time.monotonic()
    results = scrape({"1": f"{exporter}/metrics", "2": f"{exporter}/broken", "3": f"{exporter}/slow",
                      "4": f"http://127.0.0.1:{closed}/metrics", "5": "not a url"}, timeout_ms=500)
    assert time.monotonic() - started < 2.5  # bounded: the slow one is cut off, concurrently with the rest
    by = {r.broker: r for r in results}
    assert by["1"].ok and by["1"].verifications == 14
    assert by["2"].error == "HTTP 500"
    assert "Timeout" in (by["3"].error or "")
    assert "Connect" in (by["4"].error or "")
    assert not by["5"].ok
    assert scrape({}, 500) == ()


# --- the brokers' other transaction signals (issue 26) -----------------------------------------------------


def test_the_other_transaction_signals_as_a_kafka_4_4_broker_exports_them():
    """Captured from a 4.4.0 lab broker running the lab's rules, with one transaction left open on sig-0."""
    text = (DATA / "jmx-exporter-kafka-rules-4.4.0-signals.txt").read_text()
    s = parse_exporter_text("1", "u", text).signals
    assert s.late_transaction_partitions == _sample(text, "kafka_server_replicamanager_partitionswithlatetransactionscount") == 0
    assert s.lso_lag is not None and ("sig", 0, 1) in s.lso_lag and ("__transaction_state", 0, 0) in s.lso_lag
    assert len(s.lso_lag) == len([ln for ln in text.splitlines() if ln.startswith("kafka_cluster_partition_laststableoffsetlag{")])
    assert (s.marker_unknown_destination_queue, s.marker_log_append_retry_queue) == (0, 0)
    assert s.coordinator_load_ms_max == _sample(text, "kafka_server_transaction_coordinator_metrics_partition_load_time_max") == 89.0
    assert s.coordinator_load_ms_avg == pytest.approx(77.8)


def test_the_signals_in_the_exporters_default_naming_and_each_one_optional():
    text = "\n".join([
        '# TYPE kafka_server_ReplicaManager_Value untyped',
        'kafka_server_ReplicaManager_Value{name="PartitionsWithLateTransactionsCount",} 2.0',
        'kafka_server_ReplicaManager_Value{name="UnderReplicatedPartitions",} 5.0',
        '# TYPE kafka_cluster_Partition_Value untyped',
        'kafka_cluster_Partition_Value{name="LastStableOffsetLag",topic="orders",partition="3",} 42.0',
        'kafka_cluster_Partition_Value{name="UnderReplicated",topic="orders",partition="3",} 0.0',
        '# TYPE kafka_coordinator_transaction_TransactionMarkerChannelManager_Value untyped',
        'kafka_coordinator_transaction_TransactionMarkerChannelManager_Value{name="LogAppendRetryQueueSize",} 7.0',
        '# TYPE kafka_server_group_coordinator_metrics_partition_load_time_max untyped',
        'kafka_server_group_coordinator_metrics_partition_load_time_max 999.0',
        '# TYPE kafka_server_transaction_coordinator_metrics_partition_load_time_max untyped',
        'kafka_server_transaction_coordinator_metrics_partition_load_time_max -Inf', ""])
    figures = parse_exporter_text("b-1", "u", text)
    assert not figures.ok  # no verification MBeans: still an error for verification ...
    s = figures.signals  # ... but the signals that are there are read
    assert (s.late_transaction_partitions, s.lso_lag, s.marker_log_append_retry_queue) == (2, (("orders", 3, 42),), 7)
    assert s.marker_unknown_destination_queue is None  # not reported: absent, not 0
    assert s.coordinator_load_ms_max is None  # -Inf before any load; the group coordinator's 999 is not ours
