"""/metrics by framework: transactional ids and open transactions per Kafka Streams application or Flink sink, and
Flink's lingering transactions.

Both bounded.  Applications are named by tenants, so the ``application`` label is capped per cluster
(:data:`APPLICATIONS_SHOWN`, the most open transactions first: txnwatch.core.frameworks.by_application) and what the
cap leaves out is counted (``txnwatch_framework_applications_omitted``).  Lingering transactions get a count per
reason (both reasons always, 0 when none) and one age series each for the oldest :data:`LINGERING_SHOWN` only, as
the transaction ages do (metrics/findings.py's top 50).  Ids and their states are the poll's listing
(ListTransactions, every coordinator), the lingering ones detection's (detect/lingering.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from txnwatch.core.frameworks import by_application
from txnwatch.core.views import LatestState
from txnwatch.core.vocabulary import LingeringReason
from txnwatch.metrics.render import LeanGauge, bound_label, int_label

#: Applications (Streams application ids, Flink sink prefixes) given series per cluster, most open first.
APPLICATIONS_SHOWN = 50
#: Lingering transactions given an age series per cluster, oldest first.
LINGERING_SHOWN = 50


class FrameworksCollector(Collector):
    def __init__(self, state: LatestState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        labels = ["cluster", "framework", "application"]
        ids = LeanGauge("txnwatch_framework_transactional_ids", "Transactional ids listed by the coordinators whose "
                        f"name a framework's naming rule reads, per application (the {APPLICATIONS_SHOWN} with the "
                        "most open transactions per cluster).", labels)
        opened = LeanGauge("txnwatch_framework_open_transactions", "Open transactions (Ongoing, Prepare*) of the same "
                           "applications.", labels)
        omitted = LeanGauge("txnwatch_framework_applications_omitted", "Applications left without "
                            "txnwatch_framework_* series by the per-cluster cap.", ["cluster"])
        lingering = LeanGauge("txnwatch_flink_lingering_transactions", "Ongoing Flink KafkaSink transactions Flink "
                              "will never finish, by reason (superseded, job_gone).", ["cluster", "reason"])
        age = LeanGauge("txnwatch_flink_lingering_transaction_age_seconds", "Age of each lingering Flink transaction "
                        f"(the oldest {LINGERING_SHOWN} per cluster).",
                        ["cluster", "transactional_id", "application", "subtask", "checkpoint", "reason"])
        for view in self._state.views():
            snapshot, findings = view.snapshot, view.findings
            if snapshot is not None and snapshot.listed:
                rows, left_out = by_application(((t.transactional_id, t.state.is_open) for t in snapshot.listed),
                                                APPLICATIONS_SHOWN)
                for row in rows:
                    key = [view.name, row.framework.value, bound_label(row.application)]
                    ids.add_metric(key, float(row.ids))
                    opened.add_metric(key, float(row.open_transactions))
                omitted.add_metric([view.name], float(left_out))
            if findings is None:
                continue
            for reason in LingeringReason:
                lingering.add_metric([view.name, reason.value],
                                     float(sum(1 for f in findings.lingering if f.reason is reason)))
            for f in findings.lingering[:LINGERING_SHOWN]:  # detection sorts them oldest first
                age.add_metric([view.name, bound_label(f.transactional_id), bound_label(f.prefix),
                                int_label(f.subtask), str(f.checkpoint), f.reason.value], f.age_ms / 1000)
        yield from (ids, opened, omitted, lingering, age)
