"""Our own events as prometheus-client Counters and Histograms: one sink fed every poll's outcome.

The collector hands each poll (snapshot, findings or the error) to its sinks; this
one counts what happened in it — the poll, its failed requests, the verification
checks and their times, the LSO stall episodes that began — into Counters and a
Histogram that live in the runtime's registry.  They only ever go up: nothing here
is recomputed from database rows, which retention deletes (client_python's
"instrument where it happens"; a restart resets them, which ``rate()`` handles).

Mirrored Kafka state (offsets, open transactions, lag, hanging) is not an event:
it stays in the custom collectors of :mod:`txnwatch.metrics`, built from the latest
published view.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client.registry import CollectorRegistry

from txnwatch.model import ClusterSnapshot

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
        self.verification_checks = counter("txnwatch_verification_checks", "Partition/open-transaction pairs "
                                           "checked against the coordinator.")
        self.verification_failures = counter("txnwatch_verification_failures", "Checks where the partition held an "
                                             "open transaction its coordinator did not list after the grace period.")
        self.verification_time = Histogram(
            "txnwatch_verification_time_seconds", "VerificationTimeMs-style, in seconds: first open on the "
            "partition until the coordinator lists the partition.", ["cluster"], registry=registry,
            buckets=VERIFICATION_BUCKETS_S)
        for cluster in clusters:  # every series exists from the start at 0
            for family in (self.polls, self.poll_failures, self.lso_stalls, self.verification_checks,
                           self.verification_failures, self.verification_time):
                family.labels(cluster)
            for api in POLL_APIS:
                self.request_errors.labels(cluster, api)

    def on_poll(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Any, error: str | None,
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
        self.verification_checks.labels(cluster).inc(check.checks)
        self.verification_failures.labels(cluster).inc(check.failures)
        for sample in check.samples:
            if sample.verification_ms is not None:
                self.verification_time.labels(cluster).observe(sample.verification_ms / 1000)
