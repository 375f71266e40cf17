"""Verification series: txnwatch's own partition-side figure and the brokers' own KIP-890 figures, side by side.

Two different measurements, named for what they measure:

* ``txnwatch_coordinator_listing_*`` — what polling sees from outside: the delay from a
  partition first showing a producer's open transaction (DescribeProducers) until the
  coordinator lists that partition in the transaction (DescribeTransactions), and how
  often it did not list it after the grace period.  Until this release these were
  called ``txnwatch_verification_time_seconds`` / ``_checks_total`` / ``_failures_total``;
  the old names are still emitted, marked deprecated, for one release (docs/metrics.md).
  They cannot be KIP-890's figures: a write the broker refused never reaches a partition.
* ``txnwatch_broker_verification*`` — the brokers' own ``VerificationTimeMs`` and
  ``VerificationFailureRate`` (``kafka.server:type=AddPartitionsToTxnManager``), read from
  each broker's Prometheus JMX exporter during the poll (cluster options
  ``broker_metrics_urls`` / ``broker_metrics_url_template``).  Only brokers that answered
  carry figures; ``txnwatch_broker_metrics_up`` says which did.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from txnwatch.state import ClusterView, LatestState

#: Bucket bounds of the listing-delay histogram, shared with the counters the collector keeps (metrics.py).
LISTING_BUCKETS_S = (0.1, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300)
BROKER = ["cluster", "broker"]


class VerificationCollector(Collector):
    """Renders both families from the latest state (rendered per collect, never waits on Kafka)."""

    def __init__(self, state: LatestState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        yield from verification_families(self._state.views())


def verification_families(views: list[ClusterView]) -> Iterator[Metric]:
    yield from _listing(views)
    yield from _brokers(views)


def _listing(views: list[ClusterView]) -> Iterator[Metric]:
    delay = HistogramMetricFamily(
        "txnwatch_coordinator_listing_delay_seconds",
        "Polled from outside the brokers: time from a partition first showing a producer's open transaction "
        "(DescribeProducers) until its coordinator lists the partition (DescribeTransactions). Not KIP-890's "
        "VerificationTimeMs: see txnwatch_broker_verification_time_seconds for the brokers' own.", labels=["cluster"])
    checks = CounterMetricFamily("txnwatch_coordinator_listing_checks",
                                 "Partition/open-transaction pairs checked against the coordinator's listing.",
                                 labels=["cluster"])
    misses = CounterMetricFamily("txnwatch_coordinator_listing_misses",
                                 "Checks where a partition held an open transaction its coordinator did not list "
                                 "after the grace period (how hanging transactions start). Not KIP-890's "
                                 "VerificationFailureRate: see txnwatch_broker_verification_failures_total.",
                                 labels=["cluster"])
    for view in views:
        counters = view.counters
        buckets = [(str(b), counters.get(f"verification_time:le:{b}", 0)) for b in LISTING_BUCKETS_S]
        delay.add_metric([view.name], buckets + [("+Inf", counters.get("verification_time:count", 0))],
                         counters.get("verification_time:sum_ms", 0) / 1000)
        checks.add_metric([view.name], counters.get("verification_checks", 0))
        misses.add_metric([view.name], counters.get("verification_failures", 0))
    yield from (delay, checks, misses)


def _brokers(views: list[ClusterView]) -> Iterator[Metric]:
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
