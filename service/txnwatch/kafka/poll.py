"""One poll of one cluster, composed as three (four) rounds of concurrent, per-broker batches.

1. Metadata: brokers, topics, partition leaders.
2. Everything that only needs the layout, to every broker at once: ListTransactions
   and ListGroups on every broker; DescribeProducers and ListOffsets (high watermark,
   last stable offset, log start) on every leader for its watched partitions;
   DescribeConfigs for ``transaction.max.timeout.ms`` until it is known.
3. What round 2 named: DescribeTransactions per coordinator, OffsetFetch per group
   coordinator (only for the groups ``groups_include``/``groups_exclude`` select).  No FindCoordinator is needed: a broker lists exactly the
   transactional ids and groups it coordinates.
4. Only when a group lags on a partition whose first unconsumed record is not dated yet: one Fetch of
   that record per partition (bounded per poll, cached), for the time lag.

The order is deliberate.  Partitions are read before coordinators, and Kafka adds a
partition to a transaction at its coordinator before the partition sees the first
write, so a transaction seen open on a partition is already known to the coordinator
when we ask it: a young transaction never looks like one the coordinator lost.  One
that completes between the two rounds shows as PrepareCommit/Complete* at the
coordinator, which detection tells apart by state.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from kafka.protocol.admin.transactions import ListTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from txnwatch.core.model import (
    ClusterSnapshot,
    GroupSnapshot,
    ListedTransaction,
    PartitionSnapshot,
    ProducerState,
    RequestError,
    TopicPartition,
    TransactionDescription,
)
from txnwatch.kafka import batches, errors, parse, record_count, records
from txnwatch.kafka.batches import HIGH_WATERMARK, LAST_STABLE, LOG_START, MAX_TIMEOUT_CONFIG, Call
from txnwatch.kafka.encoded import RequestMemo
from txnwatch.kafka.errors import ClusterUnreachable
from txnwatch.kafka.record_count import RecordCounts
from txnwatch.kafka.records import RecordDates
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.kafka.wire import Reply, Wire

R = TypeVar("R")
log = logging.getLogger(__name__)

DEFAULT_MAX_TRANSACTION_TIMEOUT_MS = 900_000
TRANSACTION_STATE_TOPIC = "__transaction_state"
_METADATA_ATTEMPTS = 2
# Share groups keep no committed offsets; OffsetFetch would only answer with an error.
_GROUP_TYPES_WITHOUT_OFFSETS = frozenset({"share"})


@dataclass(frozen=True, slots=True)
class Collected:
    """A snapshot (duration not yet known) and the broker config learned on the way."""

    snapshot: ClusterSnapshot
    max_transaction_timeout_ms: int | None


@dataclass(slots=True)
class _Round2:
    """Round-two answers folded per question; mutable only while one poll assembles it."""

    listed: list[ListedTransaction] = field(default_factory=list)
    listing_failed: set[int] = field(default_factory=set)
    groups: list[parse.ListedGroup] = field(default_factory=list)
    producers: dict[TopicPartition, tuple[ProducerState, ...]] = field(default_factory=dict)
    offsets: dict[str, dict[TopicPartition, int | None]] = field(default_factory=lambda: defaultdict(dict))
    max_timeout_ms: int | None = None
    errors: list[RequestError] = field(default_factory=list)


@dataclass(slots=True)
class _Round3:
    transactions: dict[str, TransactionDescription] = field(default_factory=dict)
    describe_failed: set[int] = field(default_factory=set)
    committed: dict[str, dict[TopicPartition, int]] = field(default_factory=dict)
    errors: list[RequestError] = field(default_factory=list)


async def collect(wire: Wire, settings: ClusterConnectionSettings, *, taken_at_ms: int,
                  known_max_timeout_ms: int | None, record_dates: RecordDates | None = None,
                  record_counts: RecordCounts | None = None, requests: RequestMemo | None = None) -> Collected:
    """Poll the cluster behind ``wire``; raises :class:`ClusterUnreachable` only if Metadata fails everywhere.

    ``requests`` keeps the encoded ListOffsets and DescribeProducers requests from poll to poll (same bytes)."""
    if requests is not None:
        requests.start_poll()
    layout, layout_errors = await _layout(wire, settings.name)
    brokers = [b.node_id for b in layout.brokers]
    # Asked once per topic, not per partition (the answer depends on the topic alone): 50 pattern matches a poll
    # on the lab instead of 2,000.
    topics_watched = {topic: settings.watches(topic, internal=topic in layout.internal_topics)
                      for topic in {tp.topic for tp in layout.leaders}}
    watched = {tp: leader for tp, leader in layout.leaders.items() if topics_watched[tp.topic]}
    led = {tp: leader for tp, leader in watched.items() if leader is not None}

    # The id pattern goes to the brokers only if they all read it (ApiVersions); the listing is filtered
    # here in every case, so a 3.x cluster and a 4.1+ one yield the same ids.
    pattern = settings.transactional_id_pattern
    server_side = pattern is not None and wire.supports(ListTransactionsRequest,
                                                        batches.LIST_TRANSACTIONS_PATTERN_VERSION)
    calls = [*batches.list_transactions(brokers, pattern if server_side else None),
             *batches.list_groups(brokers),
             *batches.describe_producers(led, requests),
             *batches.list_offsets(led, timeout_ms=settings.request_timeout_ms, memo=requests)]
    if known_max_timeout_ms is None:
        asked = layout.controller_id if layout.controller_id in brokers else brokers[0]
        calls.append(batches.describe_broker_config(asked, MAX_TIMEOUT_CONFIG))
    second = _fold_round2(await wire.exchange(calls))
    if pattern is not None:
        second.listed = [t for t in second.listed if settings.lists_transaction(t.transactional_id)]

    listed_groups = [g for g in _first_per_key(second.groups, lambda g: g.group_id)
                     if g.group_type not in _GROUP_TYPES_WITHOUT_OFFSETS]
    groups = [g for g in listed_groups if settings.watches_group(g.group_id)]
    calls = [*batches.describe_transactions(_by_coordinator(
                 (t.coordinator_id, t.transactional_id)
                 for t in _first_per_key(second.listed, lambda t: t.transactional_id))),
             *batches.offset_fetch(_by_coordinator((g.coordinator_id, g.group_id) for g in groups),
                                   batched=wire.supports(OffsetFetchRequest, 8))]
    third = _fold_round3(await wire.exchange(calls) if calls else [])

    # A coordinator partition without a live leader is in no broker's listing.
    orphaned = {tp: leader for tp, leader in layout.leaders.items()
                if tp.topic == TRANSACTION_STATE_TOPIC and leader not in brokers}
    unreachable = second.listing_failed | third.describe_failed | {n for n in orphaned.values() if n is not None}
    max_timeout_ms = second.max_timeout_ms or known_max_timeout_ms
    high, stable, start = (second.offsets[q.name] for q in (HIGH_WATERMARK, LAST_STABLE, LOG_START))
    producers = second.producers
    partitions = {tp: PartitionSnapshot(tp=tp, leader=leader, high_watermark=high.get(tp),
                                        last_stable_offset=stable.get(tp), log_start_offset=start.get(tp),
                                        producers=producers.get(tp))
                  for tp, leader in sorted(watched.items())}
    group_snapshots = {g.group_id: GroupSnapshot(g.group_id, g.state, g.protocol_type,
                                                 third.committed.get(g.group_id, {})) for g in groups}
    dated, fetch_errors = await _first_unconsumed(wire, partitions, group_snapshots, record_dates)
    counted, count_errors = await _records_to_lso(wire, partitions, group_snapshots, record_counts)
    fetch_errors.extend(count_errors)
    for problem in fetch_errors:
        if problem.name == errors.CORRUPT:  # an unreadable record: found once, then answered from the cache
            log.warning("cluster %s: Fetch %s: %s", settings.name, problem.target, problem.message)
    snapshot = ClusterSnapshot(
        cluster=settings.name,
        taken_at_ms=taken_at_ms,
        duration_ms=0,
        brokers=layout.brokers,
        controller_id=layout.controller_id,
        listed=tuple(second.listed),
        transactions=third.transactions,
        partitions=partitions,
        groups=group_snapshots,
        errors=(*layout_errors, *second.errors, *third.errors, *fetch_errors),
        listing_complete=not second.listing_failed and not orphaned,
        unreachable_coordinators=frozenset(unreachable),
        max_transaction_timeout_ms=max_timeout_ms or DEFAULT_MAX_TRANSACTION_TIMEOUT_MS,
        first_unconsumed_ms={key: d.timestamp_ms for key, d in dated.items() if d.unreadable is None},
        unreadable_records={key: d.unreadable for key, d in dated.items() if d.unreadable is not None},
        committed_records=counted,
        groups_filtered=len(listed_groups) - len(groups),
        transactional_id_pattern=pattern,
    )
    return Collected(snapshot, max_timeout_ms)


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


def _fold_round2(replies: Iterable[Reply]) -> _Round2:
    folded = _Round2()
    for reply in replies:
        call, node = reply.call, reply.call.node_id
        if reply.failure is not None:
            folded.errors.append(errors.from_exception(call.api, errors.broker_target(node), reply.failure,
                                                       call.variant))
            if call.api == "ListTransactions":
                folded.listing_failed.add(node)
            continue
        if call.api == "ListTransactions":
            listed = parse.parse_list_transactions(reply.response, node)
            if listed.value is None:
                folded.listing_failed.add(node)
            folded.listed.extend(listed.value or ())
            folded.errors.extend(listed.errors)
        elif call.api == "ListGroups":
            groups = parse.parse_list_groups(reply.response, node)
            folded.groups.extend(groups.value or ())
            folded.errors.extend(groups.errors)
        elif call.api == "DescribeProducers":
            producers = parse.parse_describe_producers(reply.response, node)
            folded.producers.update(producers.value)
            folded.errors.extend(producers.errors)
        elif call.api == "ListOffsets":
            offsets = parse.parse_list_offsets(reply.response, node, call.variant)
            folded.offsets[call.variant].update(offsets.value)
            folded.errors.extend(offsets.errors)
        elif call.api == "DescribeConfigs":
            config = parse.parse_int_config(reply.response, node, MAX_TIMEOUT_CONFIG)
            folded.max_timeout_ms = config.value
            folded.errors.extend(config.errors)
    return folded


def _fold_round3(replies: Iterable[Reply]) -> _Round3:
    folded = _Round3()
    for reply in replies:
        call = reply.call
        if reply.failure is not None:
            target = call.variant or errors.broker_target(call.node_id)
            folded.errors.append(errors.from_exception(call.api, target, reply.failure))
            if call.api == "DescribeTransactions":
                folded.describe_failed.add(call.node_id)
        elif call.api == "DescribeTransactions":
            described = parse.parse_describe_transactions(reply.response, call.node_id)
            folded.transactions.update(described.value)
            folded.errors.extend(described.errors)
        elif call.api == "OffsetFetch":
            fetched = parse.parse_offset_fetch(reply.response, call.variant or None)
            folded.committed.update(fetched.value)
            folded.errors.extend(fetched.errors)
    return folded


def _first_per_key(rows: Iterable[R], key: Callable[[R], str]) -> list[R]:
    """One row per id: two brokers list the same id only while its coordinator moves."""
    seen: dict[str, R] = {}
    for row in rows:
        seen.setdefault(key(row), row)
    return list(seen.values())


def _by_coordinator(pairs: Iterable[tuple[int, str]]) -> dict[int, list[str]]:
    grouped: dict[int, list[str]] = defaultdict(list)
    for node, key in pairs:
        grouped[node].append(key)
    return grouped
