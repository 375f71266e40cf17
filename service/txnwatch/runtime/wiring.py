"""The composition root: builds the whole runtime in one go and lists its services in start order.

This is the only module that knows all the rooms (kafka/, detect/, store/, metrics,
alerting/); each of them knows only the snapshot and finding types in model.py and
detect/.  Nothing is patched into a built object later: :func:`build_runtime`
returns a finished :class:`~txnwatch.runtime.lifecycle.Runtime`.

Services start in the order of :func:`_services` and stop in reverse:

1. leadership — the per-cluster leases (txnwatch.fleet): a first round before anything
   acts on them, then renewed on their own thread; given up last, after the current
   poll is finished and the outbox flushed;
2. store — register every configured cluster, in one transaction;
3. alerting — retire incidents of clusters no longer configured, then deliver the outbox;
4. transaction-log — one tail of ``__transaction_state`` per cluster (exact coordinator history;
   polling is the fallback where the log cannot be read);
5. collector — the polls of the clusters this replica holds and the side jobs (store flush;
   retention, retired clusters and archiving the transition stream on the holder of the
   housekeeping lease);
6. canary — the transactional canary of each cluster that enables it (txnwatch.canary), a thread per
   cluster; its finding joins the alert conditions of the cluster's next poll.

Every per-cluster part asks the leases whether this replica holds its cluster now.

Adding a service is one line in :func:`_services`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.registry import CollectorRegistry
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from txnwatch import detect
from txnwatch.alerting import Alerting, effective_rules
from txnwatch.alerting.from_findings import AlertSink, ConditionBuilder
from txnwatch.alerting.metrics import AlertingMetrics
from txnwatch.canary.probe import ClusterCanary, ProbeSettings
from txnwatch.canary.service import CanaryService
from txnwatch.collect.poll_loop import ClusterPollLoop, Collector, Sink
from txnwatch.core.canary import CanaryFailure, CanaryView
from txnwatch.core.config import ClusterConfig, Settings
from txnwatch.core.model import AbortOutcome, TerminateOutcome, TopicPartition
from txnwatch.core.views import HistoryView, LatestState
from txnwatch.fleet.balance import HOUSEKEEPING
from txnwatch.fleet.leadership import Leadership, SingleInstance, leadership_for
from txnwatch.metrics.auth_failures import AuthFailureMetrics, shared_counts
from txnwatch.metrics.canary import CanaryMetrics
from txnwatch.metrics.exposition import Exposition
from txnwatch.metrics.lag import LagMetricOptions
from txnwatch.metrics.poll_counters import PollMetrics
from txnwatch.metrics.registry import build_registry
from txnwatch.remedy.commands import AdminCalls
from txnwatch.runtime.lifecycle import Runtime, Service
from txnwatch.runtime.malloc_arenas import heap_trimmer
from txnwatch.runtime.publication import MetricsFile, Publication, Publisher
from txnwatch.store import resume
from txnwatch.store.archive_pacing import ArchivePacing, newest_transition_id
from txnwatch.store.db import make_engine, make_read_sessionmaker, make_sessionmaker
from txnwatch.store.health import StoreHealth
from txnwatch.store.lag_sampling import LagSampling
from txnwatch.store.offset_pictures import OffsetPictures
from txnwatch.store.queries import cluster_ids
from txnwatch.store.recorder import Recorder

if TYPE_CHECKING:
    from txnwatch.store.archive_job import Children

RETENTION_INTERVAL_S = 3600
TRANSITIONS_ARCHIVE_INTERVAL_S = 60
STORE_FLUSH_INTERVAL_S = 5.0
log = logging.getLogger(__name__)


def build_runtime(settings: Settings, *, collect: bool = True, publish_to: Path | None = None,
                  metrics_to: Path | None = None) -> Runtime:
    """The daemon's runtime; ``collect=False`` builds only what the API needs (no services: tests, tools).

    ``publish_to``: the directory the API worker processes read (``api.workers`` ≥ 1); each render of the
    exposition is written there with the clusters' views (txnwatch.runtime.publication).  The workers add
    their failed authentications to counts in shared memory this process renders (``auth_failures.counts``).
    ``metrics_to``: without workers, the directory the metrics port's process reads; each render is written there
    (the exposition only)."""
    engine = make_engine(settings.database_url)
    sessions = make_sessionmaker(engine)
    state = LatestState([c.name for c in settings.clusters])
    health = StoreHealth()
    names = [c.name for c in settings.clusters]
    leadership: Leadership = leadership_for(settings.database_url, names, settings.fleet) if collect \
        else SingleInstance(names)
    registry = build_registry(state, leadership.is_leader, LagMetricOptions.from_settings(settings), own=[health])
    publisher: Publisher | MetricsFile | None = None
    if publish_to is not None:
        publisher = Publisher(publish_to, state, leadership, health, names)
    elif metrics_to is not None:
        publisher = MetricsFile(metrics_to)
    exposition = Exposition(registry, max_age_s=fastest_poll_s(settings),
                            on_render=after_render(publisher.publish if publisher is not None else None,
                                                   heap_trimmer() if collect else None))
    services = (_services(settings, engine, sessions, state, leadership, health, registry, exposition)
                if collect else ())
    return Runtime(settings=settings, engine=engine, sessions=sessions, read_sessions=make_read_sessionmaker(engine),
                   state=state, leadership=leadership,
                   registry=registry, store_health=health, exposition=exposition, admin_calls=ADMIN_CALLS,
                   auth_failures=AuthFailureMetrics(registry, shared_counts() if publish_to is not None else None),
                   services=services)


def build_api_runtime(settings: Settings, directory: Path, auth_counts: Any = None) -> Runtime:
    """An API worker process's runtime: its own database pool; the collector's memory as last published; its
    failed authentications counted in ``auth_counts``, which the collector renders."""
    engine = make_engine(settings.database_url)
    publication = Publication(directory, [c.name for c in settings.clusters])
    stale_after_s = 3 * fastest_poll_s(settings) + 30

    def collector_problems() -> list[str]:
        age_s = publication.age_s()
        if age_s is None:
            return ["the collector process has not published its first poll yet"]
        if age_s > stale_after_s:
            return [f"the collector process has not published for {age_s:.0f}s (it publishes after every poll)"]
        return []

    return Runtime(settings=settings, engine=engine, sessions=make_sessionmaker(engine),
                   read_sessions=make_read_sessionmaker(engine), state=publication.state,
                   leadership=publication.leadership, registry=CollectorRegistry(auto_describe=False),
                   store_health=publication.health, exposition=publication.exposition, admin_calls=ADMIN_CALLS,
                   auth_failures=AuthFailureMetrics(None, auth_counts),
                   refresh=publication.refresh, collector_problems=collector_problems)




def after_render(publish: Callable[[bytes], None] | None,
                 trim: Callable[[], bool] | None) -> Callable[[bytes], None] | None:
    """What the exposition thread does with each render: hand it on (API workers, the metrics port), then give
    the poll's and the render's freed memory back to the kernel (txnwatch.runtime.malloc_arenas.heap_trimmer:
    after the render, the poll that preceded it is over and its answers are garbage)."""
    if trim is None:
        return publish

    def then_trim(rendered: bytes) -> None:
        try:
            if publish is not None:
                publish(rendered)
        finally:
            trim()

    return then_trim


def fastest_poll_s(settings: Settings) -> float:
    """The shortest poll interval: the exposition renders at least this often, even without a poll."""
    return min([settings.interval_for(c) for c in settings.clusters] or [settings.poll_interval_seconds])


def abort_transaction(cluster: ClusterConfig, tp: TopicPartition, producer_id: int | None,
                      producer_epoch: int | None, coordinator_epoch: int | None, *, dry_run: bool,
                      start_offset: int | None = None) -> AbortOutcome:
    """The admin abort's Kafka call (API and CLI): one short-lived connection per call (rare, and never on the poll's connection)."""
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    with ClusterConnection(ClusterConnectionSettings.from_config(cluster)) as connection:
        return connection.abort_transaction(tp, producer_id, producer_epoch, coordinator_epoch, dry_run=dry_run,
                                            start_offset=start_offset)


def terminate_transaction(cluster: ClusterConfig, transactional_id: str, *, dry_run: bool) -> TerminateOutcome:
    """The abort by transactional id's Kafka call (API and CLI), on a short-lived connection like the abort's."""
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    with ClusterConnection(ClusterConnectionSettings.from_config(cluster)) as connection:
        return connection.terminate_transaction(transactional_id, dry_run=dry_run)


#: The admin actions' Kafka calls (txnwatch.remedy), for the runtimes and the CLI.
ADMIN_CALLS = AdminCalls(abort_transaction=abort_transaction, terminate_transaction=terminate_transaction)


def _services(settings: Settings, engine: Engine, sessions: sessionmaker[Session], state: LatestState,
              leadership: Leadership, health: StoreHealth, registry: CollectorRegistry,
              exposition: Exposition) -> tuple[Service, ...]:
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    recorder = Recorder(sessions, {c.name: ",".join(c.bootstrap_servers) for c in settings.clusters}, health,
                        exact_history=lambda name: (v := state.get(name)) is not None and v.history.exact,
                        lag_sampling=LagSampling({c.name: settings.lag_sample_interval_for(c) for c in settings.clusters}),
                        offset_pictures=OffsetPictures({c.name: settings.offset_sample_interval_for(c)
                                                        for c in settings.clusters}))
    alerting = Alerting.from_settings(settings, sessions, leading=leadership.is_leader, leases=leadership,
                                      client_url=settings.public_url,
                                      metrics=AlertingMetrics(registry))
    canaries = canary_service(settings, leadership, CanaryMetrics(registry, [c.name for c in settings.clusters
                                                                             if c.canary.enabled]), state)
    builders = {c.name: ConditionBuilder(c.name, ",".join(c.bootstrap_servers),
                                         settings.detection.verification_failure_ratio,
                                         canary=_finding_of(canaries, c.name)) for c in settings.clusters}
    sinks: list[Sink] = [recorder, AlertSink(alerting, builders, sessions, effective_rules(settings.alert_rules)),
                         PollMetrics(registry, [c.name for c in settings.clusters]), exposition]
    collectors = []
    for cluster in settings.clusters:
        connection_settings = ClusterConnectionSettings.from_config(cluster)
        evaluate = partial(detect.evaluate, settings=detect.DetectionSettings.from_config(settings.detection, cluster))
        collectors.append((
            ClusterPollLoop(cluster.name, connect=partial(ClusterConnection, connection_settings),
                             evaluate=evaluate, start_state=partial(resumed_state, sessions, cluster.name),
                             sinks=sinks, state=state, count_events=detect.event_counts,
                             leading=partial(leadership.term, cluster.name)),
            settings.interval_for(cluster),
        ))
    collector = Collector(collectors)
    housekeeping = partial(leadership.holds, HOUSEKEEPING)
    collector.add_job(recorder.flush, STORE_FLUSH_INTERVAL_S, "store:flush-buffer")
    from txnwatch.store.archive_job import Children, say_if_unavailable

    children = Children()  # the archive child: ended first when the daemon stops (the last service below)
    collector.add_job(_when(housekeeping, partial(archive_then_purge, settings, children)),
                      RETENTION_INTERVAL_S, "store:retention")

    say_if_unavailable(settings)  # without the archive extra: one line at start, not a failed child every hour
    configured = [c.name for c in settings.clusters]
    tails = transaction_log_service(settings, sessions, state, leadership, health)
    if tails is not None:
        paced = ArchivePacing(partial(newest_transition_id, sessions), partial(archive_transitions, settings, children))
        collector.add_job(_when(housekeeping, paced), TRANSITIONS_ARCHIVE_INTERVAL_S, "store:archive-transitions")
    retired_in: list[int | None] = [None]

    def retire_clusters() -> None:
        """Once per term of the housekeeping lease: resolve the incidents of clusters no longer configured."""
        term = leadership.term(HOUSEKEEPING)
        if term is not None and term != retired_in[0]:
            alerting.retire_clusters(configured, datetime.now(timezone.utc))
            retired_in[0] = term

    collector.add_job(retire_clusters, STORE_FLUSH_INTERVAL_S, "alerting:retire-clusters")

    def start_alerting() -> None:
        retire_clusters()
        alerting.start()

    return (
        Service("leadership", leadership.start, leadership.stop),
        Service("store", recorder.start),
        Service("alerting", start_alerting, alerting.stop),
        *((Service("transaction-log", tails.start, tails.stop),) if tails is not None else ()),
        Service("exposition", exposition.start, exposition.stop),
        Service("collector", collector.start, partial(collector.stop, wait=True)),
        *((Service("canary", canaries.start, canaries.stop),) if canaries is not None else ()),
        # Stopped first: the collector's stop waits for its running jobs, an archive export among them.
        Service("archive-children", children.start, children.stop),
    )


def canary_service(settings: Settings, leadership: Leadership, metrics: CanaryMetrics,
                   state: LatestState) -> CanaryService | None:
    """The transactional canary of every cluster that enables it (docs/canary.md), on threads of its own.  Its
    metric families are registered either way (without series when no cluster enables it), as docs/metrics.yaml
    promises every family.  Each round's view goes into the cluster's view in ``state`` (the API, the console)."""
    from txnwatch.kafka import ClusterConnectionSettings
    from txnwatch.kafka.canary import CanaryClient

    enabled = [c for c in settings.clusters if c.canary.enabled]
    if not enabled:
        return None
    canaries = []
    for cluster in enabled:
        config = cluster.canary
        probe = ProbeSettings(topic=config.topic, transactional_id=config.transactional_id_for(cluster.name),
                              interval_s=config.interval_seconds, timeout_ms=config.timeout_ms,
                              failures_to_alert=config.failures_to_alert)
        connect = partial(CanaryClient, ClusterConnectionSettings.from_config(cluster), topic=probe.topic,
                          transactional_id=probe.transactional_id, replication_factor=config.replication_factor,
                          transaction_timeout_ms=config.transaction_timeout_ms, timeout_ms=config.timeout_ms)
        canaries.append(ClusterCanary(cluster.name, probe, connect, [metrics],
                                      leading=partial(leadership.holds, cluster.name),
                                      publish=partial(_publish_canary, state, cluster.name)))
    return CanaryService(canaries)


def _publish_canary(state: LatestState, cluster: str, view: CanaryView | None) -> None:
    state.update(cluster, canary=view)


def _finding_of(canaries: CanaryService | None, cluster: str) -> Callable[[], CanaryFailure | None] | None:
    canary = canaries.canaries.get(cluster) if canaries is not None else None
    if canary is None:
        return None
    return lambda: canary.finding


def transaction_log_service(settings: Settings, sessions: sessionmaker[Session], state: LatestState,
                            leadership: Leadership, health: StoreHealth | None = None) -> Any:
    """One tail of __transaction_state per cluster (exact history), unless turned off."""
    from txnwatch.collect.txnlog_tail import ClusterTail, TxnLogService
    from txnwatch.kafka import ClusterConnectionSettings, TransactionLogTail
    from txnwatch.kafka.txnlog import denied_reason

    config = settings.transaction_log
    if not config.enabled:
        for cluster in settings.clusters:
            state.update(cluster.name, history=HistoryView(reason="transaction_log.enabled is false"))
        return None
    detection = detect.DetectionSettings.from_config(settings.detection)
    tails = []
    for cluster in settings.clusters:
        connection = ClusterConnectionSettings.from_config(cluster)

        def open_tail(positions: Any, c: ClusterConnectionSettings = connection) -> TransactionLogTail:
            return TransactionLogTail(c, positions=positions, from_beginning=config.start_from == "beginning",
                                      fetch_wait_ms=config.fetch_wait_ms)

        def fence(session: Session | Connection, name: str = cluster.name) -> None:
            leadership.fence(session, name)

        tails.append(ClusterTail(cluster.name, ",".join(cluster.bootstrap_servers), open_tail, sessions, state,
                                 leading=partial(leadership.term, cluster.name), fence=fence, detection=detection,
                                 retry_s=config.retry_seconds, commit_busy_s=config.busy_commit_ms / 1000,
                                 denied_reason=denied_reason, health=health,
                                 keeps=connection.lists_transaction if cluster.transactional_id_pattern else None))
    return TxnLogService(tails)


def archive_transitions(settings: Settings, children: Children | None = None) -> bool:
    """The full transition stream leaves the database once archived and older than the hot window
    (in a child process: see txnwatch.store.archive_job; paced by txnwatch.store.archive_pacing)."""
    from txnwatch.store.archive_job import run_in_child

    return run_in_child("transitions", settings, children)


def resumed_state(sessions: sessionmaker[Session], cluster: str) -> detect.DetectorState:
    """Detection carries on the incidents the store holds open; from scratch if it cannot be read."""
    try:
        with sessions() as session:
            cluster_id = cluster_ids(session, [cluster]).get(cluster)
            if cluster_id is None:  # never recorded: nothing can be open
                return detect.INITIAL
            return detect.resumed(resume.open_stalls(session, cluster_id, cluster),
                                  resume.prepare_since(session, cluster_id), resume.unlisted_open(session, cluster_id))
    except Exception as exc:
        log.warning("cluster %s: could not read open incidents back (%s); detection starts afresh, so an LSO "
                    "stall or stuck Prepare* still open is timed again from now", cluster, exc)
        return detect.INITIAL


def archive_then_purge(settings: Settings, children: Children | None = None) -> None:
    """History leaves the database only once it is in the Parquet archive the pipeline reads
    (in a child process, so pyarrow never weighs on the daemon: see txnwatch.store.archive_job)."""
    from txnwatch.store.archive_job import run_in_child

    run_in_child("history", settings, children)


def _when(condition: Callable[[], bool], job: Callable[[], Any]) -> Callable[[], None]:
    """Leader-only side jobs: followers keep the schedule but skip the work."""

    def run() -> None:
        if condition():
            job()

    return run
