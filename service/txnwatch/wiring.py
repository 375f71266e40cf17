"""Connects kafka/ → detect/ → store/ and alerting/ for each configured cluster.

This is the only module that knows all the rooms; each of them knows only the
snapshot and finding types in model.py and detect/.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from txnwatch.collector import ClusterCollector, Collector
from txnwatch.runtime import Runtime
from txnwatch.store.recorder import Recorder
from txnwatch.store.retention import purge

RETENTION_INTERVAL_S = 3600


def wire_collection(runtime: Runtime) -> None:
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    settings = runtime.settings
    recorder = Recorder(runtime.sessions, runtime.state)
    sinks: list[Any] = [recorder]
    collectors = []
    for cluster in settings.clusters:
        recorder.register_cluster(cluster.name, ",".join(cluster.bootstrap_servers))
        connection_settings = ClusterConnectionSettings.from_config(cluster)
        collectors.append((
            ClusterCollector(
                cluster.name,
                connect=lambda s=connection_settings: ClusterConnection(s),
                evaluate=lambda state, snapshot, now_ms: (state, None),
                initial_state=None,
                sinks=sinks,
                state=runtime.state,
            ),
            settings.interval_for(cluster),
        ))
    collector = Collector(collectors)
    collector.add_job(recorder.flush, 5.0, "store:flush-buffer")
    collector.add_job(lambda: purge(runtime.sessions, datetime.now(timezone.utc), settings.retention.days),
                      RETENTION_INTERVAL_S, "store:retention")
    runtime.starters.append(collector.start)
    runtime.stoppers.append(lambda: collector.stop(wait=True))
