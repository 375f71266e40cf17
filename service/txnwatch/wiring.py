"""Connects kafka/ → detect/ → store/ and alerting/ for each configured cluster.

This is the only module that knows all the rooms; each of them knows only the
snapshot and finding types in model.py and detect/.
"""

from __future__ import annotations

from datetime import datetime, timezone
from collections.abc import Callable
from typing import Any

from txnwatch.collector import ClusterCollector, Collector
from txnwatch.leader import leadership_for
from txnwatch.runtime import Runtime
from txnwatch.store.recorder import Recorder
from txnwatch.store.retention import purge

RETENTION_INTERVAL_S = 3600


def wire_collection(runtime: Runtime) -> None:
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    settings = runtime.settings
    leadership = leadership_for(runtime.engine)
    runtime.leadership = leadership
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
                leading=leadership.is_leader,
            ),
            settings.interval_for(cluster),
        ))
    collector = Collector(collectors)
    refresh_s = max(1.0, min([settings.interval_for(c) for c in settings.clusters] or [5.0]) / 2)
    collector.add_job(leadership.refresh, refresh_s, "leader:refresh")
    collector.add_job(recorder.flush, 5.0, "store:flush-buffer")
    collector.add_job(_when(leadership.is_leader, lambda: purge(runtime.sessions, datetime.now(timezone.utc),
                                                                settings.retention.days)),
                      RETENTION_INTERVAL_S, "store:retention")
    runtime.starters.insert(0, leadership.refresh)
    runtime.starters.append(collector.start)
    runtime.stoppers.append(leadership.release)
    runtime.stoppers.append(lambda: collector.stop(wait=True))


def _when(condition: Callable[[], bool], job: Callable[[], Any]) -> Callable[[], None]:
    """Leader-only side jobs: followers keep the schedule but skip the work."""

    def run() -> None:
        if condition():
            job()

    return run
