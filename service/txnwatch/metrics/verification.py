"""The brokers' own KIP-890 verification figures, mirrored from the latest poll into /metrics.

``txnwatch_broker_verification*`` are the brokers' ``VerificationTimeMs`` and
``VerificationFailureRate`` (``kafka.server:type=AddPartitionsToTxnManager``), read
from each broker's Prometheus JMX exporter during the poll (cluster options
``broker_metrics_urls`` / ``broker_metrics_url_template``).  Only brokers that
answered carry figures; ``txnwatch_broker_metrics_up`` says which did.  They sit
beside txnwatch's own partition-side figures, ``txnwatch_coordinator_listing_*``
(events counted in metrics/poll_counters.py; formerly ``txnwatch_verification_*``), which
measure something else: what a poller sees from outside, which can never include
a write the broker refused.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from txnwatch.core.views import ClusterView, LatestState

BROKER = ["cluster", "broker"]


class BrokerVerificationCollector(Collector):
    """Renders the brokers' figures from the latest state (never waits on Kafka or an exporter)."""

    def __init__(self, state: LatestState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        yield from broker_verification_families(self._state.views())


def broker_verification_families(views: list[ClusterView]) -> Iterator[Metric]:
    up = GaugeMetricFamily("txnwatch_broker_metrics_up", "1 if the broker's JMX exporter answered the last poll with "
                           "its AddPartitionsToTxnManager MBeans, else 0.", labels=BROKER)
    verifications = CounterMetricFamily(
        "txnwatch_broker_verifications", "The broker's own count of KIP-890 verifications (Count of "
        "kafka.server:type=AddPartitionsToTxnManager,name=VerificationTimeMs).", labels=BROKER)
    failures = CounterMetricFamily(
        "txnwatch_broker_verification_failures", "The broker's own count of transactional writes that failed "
        "verification (Count of ...AddPartitionsToTxnManager,name=VerificationFailureRate).", labels=BROKER)
    failure_rate = GaugeMetricFamily(
        "txnwatch_broker_verification_failures_per_second", "VerificationFailureRate as the broker reports it "
        "(its one-minute rate).", labels=BROKER)
    time = GaugeMetricFamily(
        "txnwatch_broker_verification_time_seconds", "VerificationTimeMs percentiles as the broker reports them "
        "(Yammer's recent-biased reservoir), in seconds.", labels=[*BROKER, "quantile"])
    time_max = GaugeMetricFamily("txnwatch_broker_verification_time_max_seconds",
                                 "The broker's VerificationTimeMs maximum, in seconds.", labels=BROKER)
    time_mean = GaugeMetricFamily("txnwatch_broker_verification_time_mean_seconds",
                                  "The broker's VerificationTimeMs mean, in seconds.", labels=BROKER)
    for view in views:
        for b in view.snapshot.broker_verification if view.snapshot is not None else ():
            labels = [view.name, b.broker]
            up.add_metric(labels, 1.0 if b.ok else 0.0)
            if b.verifications is not None:
                verifications.add_metric(labels, b.verifications)
            if b.failures is not None:
                failures.add_metric(labels, b.failures)
            if b.failures_per_second_1m is not None:
                failure_rate.add_metric(labels, b.failures_per_second_1m)
            for quantile, ms in b.time_ms_quantiles:
                time.add_metric([*labels, _quantile_label(quantile)], ms / 1000)
            if b.time_ms_max is not None:
                time_max.add_metric(labels, b.time_ms_max / 1000)
            if b.time_ms_mean is not None:
                time_mean.add_metric(labels, b.time_ms_mean / 1000)
    yield from (up, verifications, failures, failure_rate, time, time_max, time_mean)


def _quantile_label(quantile: float) -> str:
    return f"{quantile:g}"
