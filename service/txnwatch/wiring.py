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
from txnwatch.state import HistoryView
from txnwatch.store import resume
from txnwatch.store.queries import cluster_ids
from txnwatch.store.recorder import Recorder
from txnwatch.store.retention import purge

RETENTION_INTERVAL_S = 3600
TRANSITIONS_ARCHIVE_INTERVAL_S = 60
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
    tails = wire_transaction_log(runtime, leadership.is_leader)
    if tails is not None:
        collector.add_job(_when(leadership.is_leader, lambda: archive_transitions(runtime)),
                          TRANSITIONS_ARCHIVE_INTERVAL_S, "store:archive-transitions")
        runtime.starters.append(tails.start)
        runtime.stoppers.append(tails.stop)
    runtime.starters.append(alerting.start)
    # Stopped in reverse: finish the current poll, then flush the outbox, then hand leadership over.
    runtime.stoppers.append(leadership.release)
    runtime.stoppers.append(alerting.stop)
    runtime.stoppers.append(lambda: collector.stop(wait=True))


def wire_transaction_log(runtime: Runtime, leading: Callable[[], bool]) -> Any:
    """One tail of __transaction_state per cluster (exact history), unless turned off."""
    from txnwatch.kafka import ClusterConnectionSettings, TransactionLogTail
    from txnwatch.kafka.txnlog import denied_reason
    from txnwatch.txnlog_service import ClusterTail, TxnLogService

    settings = runtime.settings
    config = settings.transaction_log
    if not config.enabled:
        for cluster in settings.clusters:
            runtime.state.update(cluster.name, history=HistoryView(reason="transaction_log.enabled is false"))
        return None
    detection = detect.DetectionSettings.from_config(settings.detection)
    tails = []
    for cluster in settings.clusters:
        connection = ClusterConnectionSettings.from_config(cluster)

        def open_tail(positions: Any, c: ClusterConnectionSettings = connection) -> TransactionLogTail:
            return TransactionLogTail(c, positions=positions, from_beginning=config.start_from == "beginning")

        tails.append(ClusterTail(cluster.name, ",".join(cluster.bootstrap_servers), open_tail, runtime.sessions,
                                 runtime.state, leading=leading, detection=detection, retry_s=config.retry_seconds,
                                 denied_reason=denied_reason))
    return TxnLogService(tails)


def archive_transitions(runtime: Runtime) -> None:
    """The full transition stream leaves the database once archived and older than the hot window."""
    from datetime import timedelta

    from txnwatch.store.archive import export_transitions_then_purge

    try:
        export_transitions_then_purge(runtime.engine, runtime.sessions, runtime.settings.retention.archive_dir,
                                      timedelta(minutes=runtime.settings.transaction_log.hot_transitions_minutes))
    except Exception:
        log.exception("archiving the transition stream to %s failed; it stays in the database until it succeeds",
                      runtime.settings.retention.archive_dir)


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
