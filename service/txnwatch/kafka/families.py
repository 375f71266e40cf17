"""The poll's request families: for each, the calls of its round and the reading of its answers.

KMinion gives each Kafka request a function of its own (``minion/list_offsets.go``); here a family
is one API asked of many brokers at once, so it is two functions: one that builds the round's calls
(most are :mod:`txnwatch.kafka.batches` as they are), and one that reads that family's replies into
what the snapshot keeps, with its errors as data.  kafka/poll.py sends every family of a round in
one exchange, so a poll still costs one round trip per round, whatever the number of families.

Each reader gets only its family's replies (:func:`by_api`), in the order the calls were made, so
the snapshot's errors keep the order of the calls.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Generic, NamedTuple, TypeVar

from kafka.protocol.admin.transactions import ListTransactionsRequest
from kafka.protocol.consumer import OffsetFetchRequest

from txnwatch.core.idpattern import wire_pattern
from txnwatch.core.model import ListedTransaction, ProducerState, RequestError, TopicPartition, TransactionDescription
from txnwatch.kafka import batches, errors, parse
from txnwatch.kafka.batches import MAX_TIMEOUT_CONFIG, Call
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.kafka.wire import Reply, Wire

R = TypeVar("R")
T = TypeVar("T")

# Share groups keep no committed offsets; OffsetFetch would only answer with an error.
_GROUP_TYPES_WITHOUT_OFFSETS = frozenset({"share"})


class Answers(NamedTuple, Generic[T]):
    """One request family's answers folded (``value``), the brokers that gave none where that matters, and the
    family's errors in the order its calls were made."""

    value: T
    errors: list[RequestError]
    missing: frozenset[int] = frozenset()


class Groups(NamedTuple):
    selected: list[parse.ListedGroup]  # the groups whose offsets are fetched
    filtered: int  # listed groups that groups_include/groups_exclude left out


# Round 2: the families that need only the layout.

def list_transactions(wire: Wire, settings: ClusterConnectionSettings, brokers: list[int]) -> list[Call]:
    """ListTransactions on every broker: each lists exactly the ids it coordinates (no FindCoordinator needed).

    The id pattern goes to the brokers only if they all read it (ApiVersions); the listing is filtered here
    in every case (:func:`listed_transactions`), so a 3.x cluster and a 4.1+ one yield the same ids."""
    pattern = settings.transactional_id_pattern
    server_side = pattern is not None and wire.supports(ListTransactionsRequest,
                                                        batches.LIST_TRANSACTIONS_PATTERN_VERSION)
    return batches.list_transactions(brokers, wire_pattern(pattern) if pattern is not None and server_side else None)


def listed_transactions(replies: list[Reply], settings: ClusterConnectionSettings) -> Answers[list[ListedTransaction]]:
    """The ids listed, in this cluster's scope; ``missing``: the brokers whose listing is not complete."""
    answered, failed, problems = _read(replies, lambda reply: parse.parse_list_transactions(reply.response,
                                                                                          reply.call.node_id))
    listed = [t for _, value in answered for t in value or ()]
    if settings.transactional_id_pattern is not None:
        listed = [t for t in listed if settings.lists_transaction(t.transactional_id)]
    missing = {call.node_id for call in failed} | {call.node_id for call, value in answered if value is None}
    return Answers(listed, problems, frozenset(missing))


def listed_groups(replies: list[Reply], settings: ClusterConnectionSettings) -> Answers[Groups]:
    """ListGroups on every broker (each lists the groups it coordinates), less share groups and the unselected."""
    answered, _, problems = _read(replies, lambda reply: parse.parse_list_groups(reply.response, reply.call.node_id))
    listed = [g for g in _first_per_key((g for _, value in answered for g in value or ()), lambda g: g.group_id)
              if g.group_type not in _GROUP_TYPES_WITHOUT_OFFSETS]
    selected = [g for g in listed if settings.watches_group(g.group_id)]
    return Answers(Groups(selected, len(listed) - len(selected)), problems)


def described_producers(replies: list[Reply]) -> Answers[dict[TopicPartition, tuple[ProducerState, ...]]]:
    """DescribeProducers on every leader for its watched partitions: who has a transaction open where."""
    answered, _, problems = _read(replies, lambda reply: parse.parse_describe_producers(reply.response,
                                                                                      reply.call.node_id))
    return Answers({tp: states for _, value in answered for tp, states in value.items()}, problems)


def listed_offsets(replies: list[Reply]) -> Answers[dict[str, dict[TopicPartition, int | None]]]:
    """ListOffsets on every leader, one call per question (high watermark, LSO, log start): question -> offsets."""
    answered, _, problems = _read(replies, lambda reply: parse.parse_list_offsets(reply.response, reply.call.node_id,
                                                                                reply.call.variant))
    offsets: dict[str, dict[TopicPartition, int | None]] = defaultdict(dict)
    for call, value in answered:
        offsets[call.variant].update(value)
    return Answers(offsets, problems)


def describe_max_timeout(layout: parse.ClusterLayout, brokers: list[int], known_ms: int | None) -> list[Call]:
    """DescribeConfigs of ``transaction.max.timeout.ms`` on the controller (else any broker), until it is known."""
    if known_ms is not None:
        return []
    asked = layout.controller_id if layout.controller_id in brokers else brokers[0]
    return [batches.describe_broker_config(asked, MAX_TIMEOUT_CONFIG)]


def max_timeout(replies: list[Reply]) -> Answers[int | None]:
    """``transaction.max.timeout.ms`` in ms, None when the broker did not say (the poll keeps what it knew)."""
    answered, _, problems = _read(replies, lambda reply: parse.parse_int_config(reply.response, reply.call.node_id,
                                                                              MAX_TIMEOUT_CONFIG))
    return Answers(answered[-1][1] if answered else None, problems)


# Round 3: what round 2 named, each at its coordinator.

def describe_transactions(listed: Iterable[ListedTransaction]) -> list[Call]:
    return batches.describe_transactions(_by_coordinator(
        (t.coordinator_id, t.transactional_id) for t in _first_per_key(listed, lambda t: t.transactional_id)))


def described_transactions(replies: list[Reply]) -> Answers[dict[str, TransactionDescription]]:
    """id -> its description; ``missing``: the coordinators that did not answer."""
    answered, failed, problems = _read(replies, lambda reply: parse.parse_describe_transactions(reply.response,
                                                                                              reply.call.node_id))
    described = {tid: d for _, value in answered for tid, d in value.items()}
    return Answers(described, problems, frozenset(call.node_id for call in failed))


def offset_fetch(wire: Wire, groups: Iterable[parse.ListedGroup]) -> list[Call]:
    """OffsetFetch per group coordinator: one call per coordinator on v8+, one per group before."""
    return batches.offset_fetch(_by_coordinator((g.coordinator_id, g.group_id) for g in groups),
                                batched=wire.supports(OffsetFetchRequest, 8))


def fetched_offsets(replies: list[Reply]) -> Answers[dict[str, dict[TopicPartition, int]]]:
    """group -> its committed offsets.  A failed pre-v8 call is reported against its group, the one it asked."""
    answered, _, problems = _read(replies, lambda reply: parse.parse_offset_fetch(reply.response,
                                                                                reply.call.variant or None),
                                  target=lambda call: call.variant or errors.broker_target(call.node_id))
    return Answers({g: offsets for _, value in answered for g, offsets in value.items()}, problems)


def by_api(replies: Iterable[Reply]) -> defaultdict[str, list[Reply]]:
    """One exchange's replies per request family, each in the order its calls were made."""
    grouped: defaultdict[str, list[Reply]] = defaultdict(list)
    for reply in replies:
        grouped[reply.call.api].append(reply)
    return grouped


def _read(replies: Iterable[Reply], parse_reply: Callable[[Reply], parse.Parsed[T]],
          target: Callable[[Call], str] | None = None) -> tuple[list[tuple[Call, T]], list[Call], list[RequestError]]:
    """A family's answers parsed, in call order: (call, value) per answer, the calls that got none, and the errors
    (a failed call's, or what an answer refused) in call order.  Errors are data: nothing here raises.

    A failed call is reported against its broker with the question it asked (``variant``), or against ``target``."""
    answered: list[tuple[Call, T]] = []
    failed: list[Call] = []
    problems: list[RequestError] = []
    for reply in replies:
        call = reply.call
        if reply.failure is not None:
            failed.append(call)
            problems.append(errors.from_exception(call.api, target(call), reply.failure) if target is not None else
                            errors.from_exception(call.api, errors.broker_target(call.node_id), reply.failure,
                                                  call.variant))
            continue
        parsed = parse_reply(reply)
        answered.append((call, parsed.value))
        problems.extend(parsed.errors)
    return answered, failed, problems


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
