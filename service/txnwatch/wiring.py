"""Connects kafka/ → detect/ → store/ and alerting/ for each configured cluster.

This is the only module that knows all the rooms; each of them knows only the
snapshot and finding types in model.py and detect/.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from typing import Any

from txnwatch import detect
from txnwatch.alerting import Alerting, effective_rules
from txnwatch.alerting.from_findings import AlertSink, ConditionBuilder
from txnwatch.collector import ClusterCollector, Collector
from txnwatch.lagmetrics import LagMetricOptions
from txnwatch.leader import leadership_for
from txnwatch.metrics import build_registry, verification_counts
from txnwatch.runtime import Runtime
from txnwatch.store import resume
from txnwatch.store.queries import cluster_ids
from txnwatch.store.recorder import Recorder
from txnwatch.store.retention import purge

RETENTION_INTERVAL_S = 3600
log = logging.getLogger(__name__)


def count_events(findings: detect.Findings | None) -> dict[str, int]:
    counts = detect.event_counts(findings)
    counts.update(verification_counts(findings))
    return counts


def wire_collection(runtime: Runtime) -> None:
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    settings = runtime.settings
    leadership = leadership_for(runtime.engine)
    runtime.leadership = leadership
    runtime.registry = build_registry(runtime.state, leadership.is_leader, LagMetricOptions.from_settings(settings))
    recorder = Recorder(runtime.sessions, runtime.state)
    alerting = Alerting.from_settings(settings, runtime.sessions, leading=leadership.is_leader,
                                      client_url=f"http://{settings.api.host}:{settings.api.port}")
    builders = {c.name: ConditionBuilder(c.name, ",".join(c.bootstrap_servers),
                                         settings.detection.verification_failure_ratio) for c in settings.clusters}
    sinks: list[Any] = [recorder, AlertSink(alerting, builders, runtime.state, runtime.sessions,
                                            effective_rules(settings.alert_rules))]
    evaluate = partial(detect.evaluate, settings=detect.DetectionSettings.from_config(settings.detection))
    collectors = []
    for cluster in settings.clusters:
        recorder.register_cluster(cluster.name, ",".join(cluster.bootstrap_servers))
        connection_settings = ClusterConnectionSettings.from_config(cluster)
        collectors.append((
            ClusterCollector(cluster.name, connect=lambda s=connection_settings: ClusterConnection(s),
                             evaluate=evaluate, start_state=partial(resumed_state, runtime, cluster.name),
                             sinks=sinks, state=runtime.state,
                             count_events=count_events, leading=leadership.is_leader),
            settings.interval_for(cluster),
        ))
    collector = Collector(collectors)
    refresh_s = max(1.0, min([settings.interval_for(c) for c in settings.clusters] or [5.0]) / 2)
    collector.add_job(leadership.refresh, refresh_s, "leader:refresh")
    collector.add_job(recorder.flush, 5.0, "store:flush-buffer")
    collector.add_job(_when(leadership.is_leader, lambda: archive_then_purge(runtime)),
                      RETENTION_INTERVAL_S, "store:retention")
    runtime.starters.insert(0, leadership.refresh)
    runtime.starters.append(_when(leadership.is_leader, lambda: alerting.retire_clusters(
        [c.name for c in settings.clusters], datetime.now(timezone.utc))))
    runtime.starters.append(collector.start)
    runtime.starters.append(alerting.start)
    # Stopped in reverse: finish the current poll, then flush the outbox, then hand leadership over.
    runtime.stoppers.append(leadership.release)
    runtime.stoppers.append(alerting.stop)
    runtime.stoppers.append(lambda: collector.stop(wait=True))


def resumed_state(runtime: Runtime, cluster: str) -> detect.DetectorState:
    """Detection carries on the incidents the store holds open; from scratch if it cannot be read."""
    try:
        with runtime.sessions() as session:
            cluster_id = cluster_ids(session, [cluster]).get(cluster)
            if cluster_id is None:  # never recorded: nothing can be open
                return detect.INITIAL
            return detect.resumed(resume.open_stalls(session, cluster_id, cluster),
                                  resume.prepare_since(session, cluster_id), resume.unlisted_open(session, cluster_id))
    except Exception as exc:
        log.warning("cluster %s: could not read open incidents back (%s); detection starts afresh, so an LSO "
                    "stall or stuck Prepare* still open is timed again from now", cluster, exc)
        return detect.INITIAL


def archive_then_purge(runtime: Runtime) -> None:
    """History leaves the database only once it is in the Parquet archive the pipeline reads."""
    from txnwatch.extras import MissingExtra, require

    settings = runtime.settings
    try:
        require("pyarrow")
    except MissingExtra as exc:
        log.error("retention: %s; history stays in the database until it is installed", exc)
        return
    from txnwatch.store.archive import export_history

    try:
        export_history(runtime.engine, settings.retention.archive_dir)
    except Exception:
        log.exception("archiving history to %s failed; keeping it in the database until it succeeds",
                      settings.retention.archive_dir)
        return
    purge(runtime.sessions, datetime.now(timezone.utc), settings.retention.days)


def _when(condition: Callable[[], bool], job: Callable[[], Any]) -> Callable[[], None]:
    """Leader-only side jobs: followers keep the schedule but skip the work."""

    def run() -> None:
        if condition():
            job()

    return run
