"""Hanging transactions, LSO stalls and lingering Flink transactions as on-call needs them: the abort command, who is blocked, what is hidden.

One builder for the REST endpoints, the console and the CLI, so all three show the same
command and the same ages.  Ages are measured one way everywhere: ``open_seconds`` from
the transaction's first write (the first poll that saw the LSO pinned at its start
offset), ``last_write_age_seconds`` from the producer's last write; the first is never
smaller than the second (it falls back to the last write when the first is unknown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from typing import Any

from sqlalchemy import Row
from sqlalchemy.orm import Session

from txnwatch.alerting.conditions import abort_at_offset_command
from txnwatch.core import commands
from txnwatch.core.config import Settings
from txnwatch.core.epoch import from_ms
from txnwatch.core.findings import LingeringTransaction
from txnwatch.core.lso_position import LsoPosition, isolation_from_position, lso_position
from txnwatch.core.views import LatestState, lowest_release
from txnwatch.core.vocabulary import BY_RULE, HANGING_TRANSACTION, LINGERING_REASONS, LSO_STALL, REASONS, HangingReason
from txnwatch.serve.api.convert import framework_of
from txnwatch.store import context
from txnwatch.store import models as m


def _seconds(start: datetime | None, end: datetime) -> float | None:
    return None if start is None else max(0.0, (end - start).total_seconds())


def _gap(hwm: int | None, lso: int | None) -> int | None:
    return None if hwm is None or lso is None else max(0, hwm - lso)


def runbook_href(settings: Settings, rule: str) -> str:
    """The configured runbook URL with the rule's anchor, else the console's own copy."""
    anchor = BY_RULE[rule].anchor
    base = settings.console.runbook_url
    return f"{base}#{anchor}" if base else f"/console/runbooks#{anchor}"


@dataclass(frozen=True)
class _Lookups:
    """What a page of incidents needs from the database, asked once for the whole page (store.context)."""

    samples: Mapping[context.PartitionKey, Row[Any]]  # partition_offsets rows
    groups: Mapping[context.PartitionKey, list[Row[Any]]]  # consumer_lag rows
    pinned: Mapping[tuple[context.PartitionKey, int], datetime]
    open_hanging: Mapping[context.PartitionKey, list[Row[Any]]]  # hanging_txns rows


def _key(episode: Any) -> context.PartitionKey:
    return context.PartitionKey(episode.cluster_id, episode.topic, episode.partition)


def _group(row: Row[Any], lso: int | None, hwm: int | None) -> dict[str, Any]:
    position = lso_position(row.committed_offset, lso, hwm)
    return dict(group_id=row.group_id, committed_offset=row.committed_offset, lag_lso=row.lag_lso,
                lag_hwm=row.lag_hwm, position=position, isolation_level=isolation_from_position(position),
                waiting_at_lso=position is LsoPosition.AT_LSO)


@dataclass(frozen=True)
class IncidentBuilder:
    session: Session
    settings: Settings
    now: datetime
    #: The live views, for what a cluster's brokers can do (the abort by id needs 4.1); None: not known.
    state: LatestState | None = None

    def abort_by_id_command(self, cluster: str, transactional_id: str | None) -> str | None:
        """The abort by transactional id where the cluster's oldest broker takes it (Kafka 4.1+), else None."""
        if transactional_id is None or cluster not in self._bootstrap or self.state is None:
            return None
        oldest = lowest_release(self.state.get(cluster))
        if not commands.supports_abort_by_id(oldest.release if oldest is not None else None):
            return None
        return commands.abort_by_id_line(self.settings.console.cli_command, self._bootstrap[cluster], transactional_id)

    @cached_property
    def _bootstrap(self) -> Mapping[str, str]:  # asked twice per item of a page
        return {c.name: ",".join(c.bootstrap_servers) for c in self.settings.clusters}

    def _lookups(self, hanging: Sequence[Any] = (), stalls: Sequence[Any] = ()) -> _Lookups:
        keys = [_key(e) for e in (*hanging, *stalls)]
        pins = [(_key(e), e.txn_start_offset) for e in hanging if e.txn_start_offset is not None]
        blocked = [_key(e) for e in stalls if e.ended_at is None and e.blocking_producer_id is not None]
        return _Lookups(samples=context.latest_samples(self.session, keys),
                        groups=context.groups_reading_many(self.session, keys),
                        pinned=context.first_pinned_many(self.session, pins),
                        open_hanging=context.open_hanging_many(self.session, blocked))

    def _partition(self, found: _Lookups, key: context.PartitionKey, start_offset: int | None, cluster: str,
                   rule: str) -> dict[str, Any]:
        sample = found.samples.get(key)
        hwm = sample.high_watermark if sample else None
        lso = sample.last_stable_offset if sample else None
        groups = [_group(g, lso, hwm) for g in found.groups.get(key, ())]
        command = kafka_command = None
        if start_offset is not None and cluster in self._bootstrap:
            bootstrap = self._bootstrap[cluster]
            command = commands.abort_line(self.settings.console.cli_command, bootstrap, key.topic, key.partition, start_offset)
            kafka_command = abort_at_offset_command(bootstrap, key.topic, key.partition, start_offset)
        return dict(abort_command=command, kafka_abort_command=kafka_command, high_watermark=hwm,
                    last_stable_offset=lso,
                    invisible_records=_gap(hwm, lso), blocked_groups=groups,
                    runbook=runbook_href(self.settings, rule))

    def lingering_all(self, clusters: Sequence[str]) -> list[dict[str, Any]]:
        """The lingering Flink transactions of ``clusters`` at their latest polls (the views' findings: no table
        holds them), oldest first, with the abort by id where the cluster takes it."""
        found: list[tuple[LingeringTransaction, int]] = []
        for name in clusters:
            view = self.state.get(name) if self.state is not None else None
            findings = view.findings if view is not None else None  # detect.Findings: serve/ never imports detect/
            if findings is not None:
                at_ms: int = findings.now_ms
                found += [(f, at_ms) for f in findings.lingering]
        found.sort(key=lambda pair: (-pair[0].age_ms, pair[0].cluster, pair[0].transactional_id))
        return [self._lingering(f, at_ms) for f, at_ms in found]

    def _lingering(self, found: LingeringTransaction, detected_ms: int) -> dict[str, Any]:
        term = LINGERING_REASONS[found.reason]
        return dict(
            cluster=found.cluster, transactional_id=found.transactional_id,
            framework=framework_of(found.transactional_id), prefix=found.prefix, subtask=found.subtask,
            checkpoint=found.checkpoint, reason=found.reason, reason_explanation=term.explanation, fix=term.fix,
            superseded_by=found.superseded_by, superseded_checkpoint=found.superseded_checkpoint,
            producer_id=found.producer_id, producer_epoch=found.producer_epoch,
            txn_started_at=from_ms(found.start_time_ms), age_seconds=found.age_ms / 1000,
            timeout_ms=found.timeout_ms, partitions=sorted(str(tp) for tp in found.partitions),
            abort_by_id_command=self.abort_by_id_command(found.cluster, found.transactional_id),
            detected_at=from_ms(detected_ms))

    def hanging_all(self, episodes: Sequence[tuple[m.HangingEpisode | Any, str]]) -> list[dict[str, Any]]:
        """Hanging episodes with their cluster names, as the API shows them; a handful of queries per page."""
        found = self._lookups(hanging=[e for e, _ in episodes])
        return [self._hanging(found, e, cluster) for e, cluster in episodes]

    def stall_all(self, episodes: Sequence[tuple[m.LsoStallEpisode | Any, str]]) -> list[dict[str, Any]]:
        """LSO stall episodes with their cluster names, as the API shows them; a handful of queries per page."""
        found = self._lookups(stalls=[e for e, _ in episodes])
        return [self._stall(found, e, cluster) for e, cluster in episodes]

    def _hanging(self, found: _Lookups, episode: m.HangingEpisode | Any, cluster: str) -> dict[str, Any]:
        key = _key(episode)
        end = episode.resolved_at or self.now
        first_write = (found.pinned.get((key, episode.txn_start_offset))
                       if episode.txn_start_offset is not None else None)
        last_write = episode.last_write_at
        if last_write is not None and (first_write is None or first_write > last_write):
            first_write = last_write  # polls see a write only after it happened: the last write bounds the first
        reason = HangingReason(episode.reason)
        term = REASONS[reason]
        return dict(
            self._partition(found, key, episode.txn_start_offset, cluster, HANGING_TRANSACTION),
            id=episode.id, cluster=cluster, topic=episode.topic, partition=episode.partition,
            producer_id=episode.producer_id, producer_epoch=episode.producer_epoch,
            transactional_id=episode.transactional_id, coordinator_id=episode.coordinator_id,
            reason=reason, reason_explanation=term.explanation, fix=term.fix,
            txn_start_offset=episode.txn_start_offset, first_write_at=first_write, last_write_at=last_write,
            first_seen_at=episode.first_seen_at, last_seen_at=episode.last_seen_at, resolved_at=episode.resolved_at,
            open_seconds=_seconds(first_write or episode.first_seen_at, end),
            last_write_age_seconds=_seconds(last_write, end),
            hanging_seconds=_seconds(episode.first_seen_at, end),
            framework=framework_of(episode.transactional_id))

    def _stall(self, found: _Lookups, episode: m.LsoStallEpisode | Any, cluster: str) -> dict[str, Any]:
        key = _key(episode)
        end = episode.ended_at or self.now
        hanging = (context.pick_hanging(found.open_hanging.get(key, []), episode.blocking_producer_id)
                   if episode.ended_at is None and episode.blocking_producer_id is not None else None)
        last_write = hanging.last_write_at if hanging is not None else None
        return dict(
            self._partition(found, key, episode.stalled_lso, cluster, HANGING_TRANSACTION if hanging else LSO_STALL),
            id=episode.id, cluster=cluster, topic=episode.topic, partition=episode.partition,
            started_at=episode.started_at, ended_at=episode.ended_at, last_seen_at=episode.last_seen_at,
            stalled_lso=episode.stalled_lso, max_gap=episode.max_gap,
            blocking_producer_id=episode.blocking_producer_id,
            blocking_producer_epoch=episode.blocking_producer_epoch,
            blocking_transactional_id=episode.blocking_transactional_id,
            blocking_last_write_at=last_write,
            hanging_reason=HangingReason(hanging.reason) if hanging is not None else None,
            duration_seconds=_seconds(episode.started_at, end) or 0.0,
            last_write_age_seconds=_seconds(last_write, end),
            # A hanging transaction is not on its coordinator's books for this partition: only the partition abort
            # ends it.  An open one that is: its coordinator aborts it everywhere and fences its producer.
            abort_by_id_command=(self.abort_by_id_command(cluster, episode.blocking_transactional_id)
                                 if hanging is None and episode.ended_at is None else None),
            blocking_framework=framework_of(episode.blocking_transactional_id))
