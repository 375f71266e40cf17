"""One poll of one cluster, composed as three (up to five) rounds of concurrent, per-broker batches.

Each round is one exchange holding the calls of all its request families, each family's
calls and the reading of its answers a pair of functions of kafka/families.py.

1. Metadata: brokers, topics, partition leaders.
2. Everything that only needs the layout, to every broker at once: ListTransactions
   and ListGroups on every broker; DescribeProducers and ListOffsets (high watermark,
   last stable offset, log start) on every leader for its watched partitions;
   DescribeConfigs for ``transaction.max.timeout.ms`` until it is known; ApiVersions on every broker
   (its release and finalized transaction.version: kafka/release.py).
3. What round 2 named: DescribeTransactions per coordinator, OffsetFetch per group
   coordinator (only for the groups ``groups_include``/``groups_exclude`` select).  No FindCoordinator is needed: a broker lists exactly the
   transactional ids and groups it coordinates.
4. Only when a group lags on a partition whose first unconsumed record is not dated yet: one Fetch of
   that record per partition (bounded per poll, cached), for the time lag.
5. Only for group partitions behind the LSO whose count is not kept up to it: one read_committed
   Fetch per leader, counting the records a read_committed consumer still has to read.

The order is deliberate.  Partitions are read before coordinators, and Kafka adds a
partition to a transaction at its coordinator before the partition sees the first
write, so a transaction seen open on a partition is already known to the coordinator
when we ask it: a young transaction never looks like one the coordinator lost.  One
that completes between the two rounds shows as PrepareCommit/Complete* at the
coordinator, which detection tells apart by state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from txnwatch.core.model import (
    TRANSACTION_STATE_TOPIC,
    ClusterSnapshot,
    GroupSnapshot,
    PartitionSnapshot,
    ProducerState,
    RequestError,
    TopicPartition,
    UnreadableRecord,
)
from txnwatch.kafka import batches, errors, families, parse, record_count, records, release
from txnwatch.kafka.batches import HIGH_WATERMARK, LAST_STABLE, LOG_START, Call
from txnwatch.kafka.encoded import RequestMemo
from txnwatch.kafka.errors import ClusterUnreachable
from txnwatch.kafka.record_count import RecordCounts
from txnwatch.kafka.records import RecordDates
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.kafka.wire import Reply, Wire

log = logging.getLogger(__name__)

DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000
_METADATA_ATTEMPTS = 2


@dataclass(frozen=True, slots=True)
class Collected:
    """A snapshot (duration not yet known) and the broker config learned on the way."""

    snapshot: ClusterSnapshot
    max_transaction_timeout_ms: int | None


async def collect(wire: Wire, settings: ClusterConnectionSettings, *, taken_at_ms: int,
                  known_max_timeout_ms: int | None, record_dates: RecordDates | None = None,
                  record_counts: RecordCounts | None = None, requests: RequestMemo | None = None) -> Collected:
    """Poll the cluster behind ``wire``; raises :class:`ClusterUnreachable` only if Metadata fails everywhere.

    Each round is one exchange: the calls of all its request families (kafka/families.py) go out together, and
    each family reads its own answers.  ``requests`` keeps the encoded ListOffsets and DescribeProducers
    requests from poll to poll (same bytes)."""
    if requests is not None:
        requests.start_poll()
    layout, layout_errors = await _layout(wire, settings.name)
    brokers = [b.node_id for b in layout.brokers]
    watched = _watched(layout, settings)
    led = {tp: leader for tp, leader in watched.items() if leader is not None}

    # Round 2: every family the layout alone can ask, in one exchange.
    second = families.by_api(await wire.exchange([
        *families.list_transactions(wire, settings, brokers),
        *batches.list_groups(brokers),
        *batches.describe_producers(led, requests),
        *batches.list_offsets(led, timeout_ms=settings.request_timeout_ms, memo=requests),
        *families.describe_max_timeout(layout, brokers, known_max_timeout_ms),
        *release.api_versions(brokers)]))
    listing = families.listed_transactions(second["ListTransactions"], settings)
    groups = families.listed_groups(second["ListGroups"], settings)
    producers = families.described_producers(second["DescribeProducers"])
    offsets = families.listed_offsets(second["ListOffsets"])
    config = families.max_timeout(second["DescribeConfigs"])
    releases, release_errors = release.releases([(r.call.node_id, r.response, r.failure)
                                                 for r in second[release.API]])

    # Round 3: what round 2 named, each at its coordinator.
    calls = [*families.describe_transactions(listing.value), *families.offset_fetch(wire, groups.value.selected)]
    third = families.by_api(await wire.exchange(calls) if calls else [])
    described = families.described_transactions(third["DescribeTransactions"])
    committed = families.fetched_offsets(third["OffsetFetch"])

    partitions = _partitions(watched, offsets.value, producers.value)
    group_snapshots = {g.group_id: GroupSnapshot(g.group_id, g.state, g.protocol_type,
                                                 committed.value.get(g.group_id, {})) for g in groups.value.selected}
    # Rounds 4 and 5, only where a group lags.
    read = await _records(wire, settings.name, partitions, group_snapshots, record_dates, record_counts)

    orphaned = _orphaned(layout, brokers)
    max_timeout_ms = config.value or known_max_timeout_ms
    answered = (listing, groups, producers, offsets, config, described, committed)  # in the order of their calls
    snapshot = ClusterSnapshot(
        cluster=settings.name,
        taken_at_ms=taken_at_ms,
        duration_ms=0,
        brokers=layout.brokers,
        controller_id=layout.controller_id,
        listed=tuple(listing.value),
        transactions=described.value,
        partitions=partitions,
        groups=group_snapshots,
        errors=(*layout_errors, *(e for family in answered for e in family.errors), *release_errors, *read.errors),
        listing_complete=not listing.missing and not orphaned,
        unreachable_coordinators=listing.missing | described.missing | {n for n in orphaned.values() if n is not None},
        max_transaction_timeout_ms=max_timeout_ms or DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        first_unconsumed_ms=read.first_unconsumed_ms,
        unreadable_records=read.unreadable,
        committed_records=read.committed_records,
        groups_filtered=groups.value.filtered,
        transactional_id_pattern=settings.transactional_id_pattern,
        broker_releases=releases,
    )
    return Collected(snapshot, max_timeout_ms)


def _watched(layout: parse.ClusterLayout, settings: ClusterConnectionSettings) -> dict[TopicPartition, int | None]:
    """The partitions this cluster's topic selection watches, with their leaders (None while leaderless).

    Asked once per topic, not per partition (the answer depends on the topic alone): 50 pattern matches a poll
    on the issue's lab instead of 2,000."""
    topics_watched = {topic: settings.watches(topic, internal=topic in layout.internal_topics)
                      for topic in {tp.topic for tp in layout.leaders}}
    return {tp: leader for tp, leader in layout.leaders.items() if topics_watched[tp.topic]}


def _partitions(watched: Mapping[TopicPartition, int | None], offsets: Mapping[str, Mapping[TopicPartition, int | None]],
                producers: Mapping[TopicPartition, tuple[ProducerState, ...]]) -> dict[TopicPartition, PartitionSnapshot]:
    high, stable, start = (offsets.get(q.name, {}) for q in (HIGH_WATERMARK, LAST_STABLE, LOG_START))
    return {tp: PartitionSnapshot(tp=tp, leader=leader, high_watermark=high.get(tp), last_stable_offset=stable.get(tp),
                                  log_start_offset=start.get(tp), producers=producers.get(tp))
            for tp, leader in sorted(watched.items())}


def _orphaned(layout: parse.ClusterLayout, brokers: list[int]) -> dict[TopicPartition, int | None]:
    """``__transaction_state`` partitions without a live leader, and that leader (None: none at all).  Such a
    coordinator partition is in no broker's listing, so the listing is not complete."""
    return {tp: leader for tp, leader in layout.leaders.items()
            if tp.topic == TRANSACTION_STATE_TOPIC and leader not in brokers}


class _Records(NamedTuple):
    first_unconsumed_ms: dict[records.Key, int | None]
    unreadable: dict[records.Key, UnreadableRecord]
    committed_records: dict[record_count.Key, int]
    errors: list[RequestError]


async def _records(wire: Wire, cluster: str, partitions: Mapping[TopicPartition, PartitionSnapshot],
                   groups: Mapping[str, GroupSnapshot], dates: RecordDates | None,
                   counts: RecordCounts | None) -> _Records:
    """Rounds 4 and 5, only where a group lags: the first unconsumed records' dates, the records up to the LSO."""
    dated, problems = await _first_unconsumed(wire, partitions, groups, dates)
    counted, count_problems = await _records_to_lso(wire, partitions, groups, counts)
    problems.extend(count_problems)
    for problem in problems:
        if problem.name == errors.CORRUPT:  # an unreadable record: found once, then answered from the cache
            log.warning("cluster %s: Fetch %s: %s", cluster, problem.target, problem.message)
    return _Records({key: d.timestamp_ms for key, d in dated.items() if d.unreadable is None},
                    {key: d.unreadable for key, d in dated.items() if d.unreadable is not None}, counted, problems)


async def _first_unconsumed(wire: Wire, partitions: Mapping[TopicPartition, PartitionSnapshot],
                            groups: Mapping[str, GroupSnapshot], dates: RecordDates | None,
                            ) -> tuple[dict[records.Key, records.Dated], list[RequestError]]:
    """Round 4, only when a group lags and its first unconsumed record is not cached: one Fetch per leader.

    An unreadable record is answered from the cache on later polls: reported once, never fetched again."""
    if dates is None or dates.limit <= 0:
        return {}, []
    wanted = records.lagging(partitions, groups.values())
    answers = dates.known(wanted, partitions)
    keys = dates.to_fetch(wanted, answers)
    calls = records.fetch_calls(keys, {tp: partitions[tp].leader for tp, _ in keys})
    replies, failures = await _fetch(wire, calls)
    for reply in replies:
        found, problems = records.parse_fetch(reply.response, records.fetched_offsets(reply.call))
        failures.extend(problems)
        dates.remember(found)
        answers.update(found)
    return answers, failures


async def _records_to_lso(wire: Wire, partitions: Mapping[TopicPartition, PartitionSnapshot],
                          groups: Mapping[str, GroupSnapshot], counts: RecordCounts | None,
                          ) -> tuple[dict[record_count.Key, int], list[RequestError]]:
    """Round 5, only for group partitions behind the LSO whose count is not kept up to this LSO: one
    read_committed Fetch per leader, continuing each kept count where it stopped."""
    if counts is None or counts.limit <= 0:
        return {}, []
    keys = record_count.wanted(partitions, groups.values())
    lsos = {tp: lso for tp, _ in keys if (lso := partitions[tp].last_stable_offset) is not None}
    answers, reads = counts.plan(keys, lsos)
    calls = record_count.fetch_calls(reads, {tp: partitions[tp].leader for tp, _ in reads})
    replies, failures = await _fetch(wire, calls)
    for reply in replies:
        asked = records.fetched_offsets(reply.call)
        by_tp = {tp: key for key in reads if (tp := key[0]) in asked and reads[key] == asked[tp]}
        found, problems = record_count.parse_fetch(reply.response, {tp: lsos[tp] for tp in by_tp},
                                                   {tp: key[1] for tp, key in by_tp.items()})
        failures.extend(problems)
        for tp, more in found.items():
            total = counts.add(by_tp[tp], more)
            if total.problem is None and total.through == lsos[tp]:
                answers[by_tp[tp]] = total.records
    return answers, failures


async def _fetch(wire: Wire, calls: list[Call]) -> tuple[list[Reply], list[RequestError]]:
    """The answered Fetch calls, and the failed ones as errors."""
    answered: list[Reply] = []
    failures: list[RequestError] = []
    for reply in await wire.exchange(calls) if calls else []:
        if reply.failure is not None:
            failures.append(errors.from_exception("Fetch", errors.broker_target(reply.call.node_id), reply.failure))
        else:
            answered.append(reply)
    return answered, failures


async def _layout(wire: Wire, cluster: str) -> tuple[parse.ClusterLayout, tuple[RequestError, ...]]:
    reasons: list[str] = []
    for node in wire.candidate_nodes()[:_METADATA_ATTEMPTS]:
        (reply,) = await wire.exchange([batches.metadata(node)])
        if reply.failure is not None:
            reasons.append(f"broker {node}: {reply.failure}")
            continue
        parsed = parse.parse_metadata(reply.response)
        if parsed.value is None:
            reasons.extend(f"broker {node}: {e.name} {e.message}" for e in parsed.errors)
            continue
        wire.learn_metadata(reply.response)
        return parsed.value, parsed.errors
    raise ClusterUnreachable(cluster, "; ".join(reasons) or "no broker available")
