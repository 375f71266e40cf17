"""Our own events as prometheus-client Counters and Histograms: one sink fed every poll's outcome.

The collector hands each poll (snapshot, findings or the error) to its sinks; this
one counts what happened in it — the poll, its failed requests, the verification
checks and their times, the LSO stall episodes that began — into Counters and a
Histogram that live in the runtime's registry.  They only ever go up: nothing here
is recomputed from database rows, which retention deletes (client_python's
"instrument where it happens"; a restart resets them, which ``rate()`` handles).

Mirrored Kafka state (offsets, open transactions, lag, hanging) is not an event:
it stays in the custom collectors :mod:`txnwatch.metrics.registry` registers, built from the latest
published view.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Histogram
from prometheus_client.registry import CollectorRegistry

from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot

#: Kafka APIs a poll uses: their error counters start at 0, so rate() sees the first error as an increase.
POLL_APIS = ("Metadata", "ListTransactions", "DescribeTransactions", "DescribeProducers", "ListOffsets", "ListGroups",
             "OffsetFetch", "DescribeConfigs")
VERIFICATION_BUCKETS_S = (0.1, 0.5, 1, 2.5, 5, 10, 15, 30, 60, 120, 300)


class PollMetrics:
    """The collector's metrics sink; one per runtime, its series registered in the runtime's registry."""

    def __init__(self, registry: CollectorRegistry, clusters: Iterable[str]) -> None:
        def counter(name: str, doc: str, labels: tuple[str, ...] = ("cluster",)) -> Counter:
            return Counter(name, doc, labels, registry=registry)

        self.polls = counter("txnwatch_polls", "Polls attempted.")
        self.poll_failures = counter("txnwatch_poll_failures", "Polls that reached no broker.")
        self.request_errors = counter("txnwatch_request_errors", "Failed requests or per-object errors inside "
                                      "answers, by Kafka API.", ("cluster", "api"))
        self.lso_stalls = counter("txnwatch_lso_stall_episodes", "LSO stall episodes started since the process "
                                  "started.")
        # txnwatch's partition-side figure, named for what it measures (polled from outside; not KIP-890's
        # VerificationTimeMs / VerificationFailureRate, which are the brokers' own: metrics/verification.py).
        self.listing_checks = counter("txnwatch_coordinator_listing_checks", "Partition/open-transaction pairs "
                                      "checked against the coordinator's listing.")
        self.listing_misses = counter("txnwatch_coordinator_listing_misses", "Checks where a partition held an open "
                                      "transaction its coordinator did not list after the grace period (how hanging "
                                      "transactions start). Not KIP-890's VerificationFailureRate: see "
                                      "txnwatch_broker_verification_failures_total.")
        self.listing_delay = Histogram(
            "txnwatch_coordinator_listing_delay_seconds", "Polled from outside the brokers: time from a partition "
            "first showing a producer's open transaction until its coordinator lists the partition. Not KIP-890's "
            "VerificationTimeMs: see txnwatch_broker_verification_time_seconds.", ["cluster"], registry=registry,
            buckets=VERIFICATION_BUCKETS_S)
        # The same figures under their old names, kept for one release (docs/metrics.md, "Renamed").
        self.verification_checks = counter("txnwatch_verification_checks", "DEPRECATED: the old name of "
                                           "txnwatch_coordinator_listing_checks_total; removed in the next release.")
        self.verification_failures = counter("txnwatch_verification_failures", "DEPRECATED: the old name of "
                                             "txnwatch_coordinator_listing_misses_total; removed in the next release.")
        self.verification_time = Histogram(
            "txnwatch_verification_time_seconds", "DEPRECATED: the old name of "
            "txnwatch_coordinator_listing_delay_seconds; removed in the next release.", ["cluster"],
            registry=registry, buckets=VERIFICATION_BUCKETS_S)
        for cluster in clusters:  # every series exists from the start at 0
            for family in (self.polls, self.poll_failures, self.lso_stalls, self.listing_checks, self.listing_misses,
                           self.listing_delay, self.verification_checks, self.verification_failures,
                           self.verification_time):
                family.labels(cluster)
            for api in POLL_APIS:
                self.request_errors.labels(cluster, api)

    def on_poll(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None,
                now_ms: int) -> None:
        self.polls.labels(cluster).inc()
        if snapshot is None:
            self.poll_failures.labels(cluster).inc()
            return
        for request_error in snapshot.errors:
            self.request_errors.labels(cluster, request_error.api).inc()
        if findings is None:  # detection failed on this snapshot: it found nothing to count
            return
        self.lso_stalls.labels(cluster).inc(len(findings.lso_stalls_opened))
        check = findings.verification
        for checks, misses, delay in ((self.listing_checks, self.listing_misses, self.listing_delay),
                                      (self.verification_checks, self.verification_failures, self.verification_time)):
            checks.labels(cluster).inc(check.checks)
            misses.labels(cluster).inc(check.failures)
            for sample in check.samples:
                if sample.verification_ms is not None:
                    delay.labels(cluster).observe(sample.verification_ms / 1000)
