"""/metrics: one prometheus-client registry of custom collectors over the latest published state.

Every scrape's render builds its series from the current :class:`~txnwatch.core.views.LatestState`,
so series of transactions, partitions and groups that vanished from Kafka vanish from /metrics too,
and a render never waits on Kafka or the database.  Names follow kafka_exporter/KMinion where the
meaning is the same (``kafka_consumergroup_lag`` is lag against the high watermark, as there);
``txnwatch_*`` covers the rest.  One collector per file, in the order they are registered (the
exposition's order): cluster_health.py, snapshot.py, findings.py, lag.py, verification.py,
broker_signals.py, history.py, hazards.py, frameworks.py.  docs/metrics.md documents every family; a test keeps the two in step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import disable_created_metrics
from prometheus_client.registry import Collector, CollectorRegistry

from txnwatch.core.views import LatestState
from txnwatch.metrics.broker_signals import BrokerSignalsCollector
from txnwatch.metrics.cluster_health import ClusterCollector
from txnwatch.metrics.findings import FindingsCollector, describe_findings
from txnwatch.metrics.frameworks import FrameworksCollector
from txnwatch.metrics.hazards import HazardsCollector
from txnwatch.metrics.history import HistoryCollector
from txnwatch.metrics.lag import LagCollector, LagMetricOptions
from txnwatch.metrics.snapshot import SnapshotCollector
from txnwatch.metrics.verification import BrokerVerificationCollector


def build_registry(state: LatestState, is_leader: Callable[[], bool], lag_options: LagMetricOptions | None = None,
                   own: Iterable[Collector] = ()) -> CollectorRegistry:
    """One registry per runtime; ``own`` are the collectors of parts that export their own figures (the store)."""
    disable_created_metrics()  # no *_created series: the exposition stays the documented families, nothing else
    registry = CollectorRegistry(auto_describe=False)
    for collector in own:
        registry.register(collector)
    registry.register(ClusterCollector(state, is_leader))
    registry.register(SnapshotCollector(state))
    registry.register(FindingsCollector(state, describe_findings))
    registry.register(LagCollector(state, lag_options or LagMetricOptions()))
    registry.register(BrokerVerificationCollector(state))
    registry.register(BrokerSignalsCollector(state))
    registry.register(HistoryCollector(state))
    registry.register(HazardsCollector(state))
    registry.register(FrameworksCollector(state))
    return registry
