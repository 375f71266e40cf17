"""/metrics for the known Kafka transaction bugs a cluster runs into, and its ids nearest epoch exhaustion.

Both from the latest snapshot (txnwatch.core.hazards over ApiVersions and DescribeTransactions): a cluster whose
brokers did not answer ApiVersions has no ``txnwatch_known_hazard`` series; the headroom series are the
``HEADROOM_SHOWN`` (5) lowest per cluster, so their count is bounded whatever the number of ids.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from txnwatch.core.hazards import cluster_hazards, epoch_headroom
from txnwatch.core.views import LatestState
from txnwatch.core.vocabulary import KnownHazard
from txnwatch.metrics.render import LeanGauge, bound_label


class HazardsCollector(Collector):
    def __init__(self, state: LatestState) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        known = LeanGauge("txnwatch_known_hazard", "1 if the cluster's brokers (release line and finalized "
                          "transaction.version, from ApiVersions) carry the known transaction bug, else 0.",
                          ["cluster", "hazard"])
        headroom = LeanGauge("txnwatch_producer_epoch_headroom", "Epoch bumps left before the producer id must "
                             "rotate (32767 - epoch), for the 5 ids nearest exhaustion per cluster only.",
                             ["cluster", "transactional_id"])
        for view in self._state.views():
            snapshot = view.snapshot
            if snapshot is None:
                continue
            if snapshot.broker_releases:
                found = set(cluster_hazards(snapshot.broker_releases))
                for hazard in KnownHazard:
                    known.add_metric([view.name, hazard.value], 1.0 if hazard in found else 0.0)
            for row in epoch_headroom(snapshot.transactions.values()):
                headroom.add_metric([view.name, bound_label(row.transactional_id)], float(row.headroom))
        yield from (known, headroom)
