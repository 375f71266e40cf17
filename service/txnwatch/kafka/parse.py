"""Wire answers to snapshot dataclasses: pure functions, no I/O.

Each function takes one decoded kafka-python response and returns :class:`Parsed`:
the facts it could read plus a :class:`RequestError` for every object the broker
refused or the answer garbled.  Nothing here raises on a bad answer: a broker bug
or a protocol surprise costs the rows it touches and is reported, never a poll.

Kafka's sentinels are resolved here and only here: ``-1`` offsets and timestamps
become ``None``, unknown state names become ``TxnState.UNKNOWN``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from txnwatch.core.model import (
    BrokerInfo,
    ListedTransaction,
    ProducerState,
    RequestError,
    TopicPartition,
    TransactionDescription,
    TxnState,
)
from txnwatch.kafka import errors

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    """What an answer told us (``value``; ``None`` when the whole answer failed) and what it refused."""

    value: T
    errors: tuple[RequestError, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterLayout:
    """The parts of a Metadata answer a poll routes by."""

    brokers: tuple[BrokerInfo, ...]
    controller_id: int | None
    leaders: Mapping[TopicPartition, int | None]
    internal_topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class ListedGroup:
    """One ListGroups row; the broker that listed it coordinates it."""

    group_id: str
    coordinator_id: int
    state: str | None
    protocol_type: str | None
    group_type: str | None


class _Corrupt(ValueError):
    pass


def _int(value: Any, what: str) -> int:
    if value.__class__ is int:  # what the decoder gives: the checks below are for a garbled answer
        return value
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Corrupt(f"{what} is {value!r}, not an integer")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Corrupt(f"{what} is {value!r}, not a name")
    return value


def _optional_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _offset(value: Any, what: str) -> int | None:
    """Offsets and timestamps: -1 means "none"; anything below is a broken answer."""
    if value.__class__ is int and value >= 0:  # the common case, without a call
        return value
    number = _int(value, what)
    if number == -1:
        return None
    if number < -1:
        raise _Corrupt(f"{what} is {number}")
    return number


_timestamp = _offset


def _unreadable(exc: Exception) -> str:
    return str(exc) if isinstance(exc, _Corrupt) else f"{type(exc).__name__}: {exc}"


_BROKEN = (_Corrupt, TypeError, AttributeError, ValueError, LookupError)


def _code(value: Any) -> int:
    return _int(value, "error_code")


# -- Metadata ---------------------------------------------------------------

def parse_metadata(response: Any) -> Parsed[ClusterLayout | None]:
    api = "Metadata"
    try:
        brokers = tuple(sorted(
            (BrokerInfo(node_id=_int(b.node_id, "node_id"), host=_str(b.host, "host"),
                        port=_int(b.port, "port"), rack=_optional_str(getattr(b, "rack", None)))
             for b in response.brokers),
            key=lambda b: b.node_id))
        controller = _int(getattr(response, "controller_id", -1), "controller_id")
        topics = list(response.topics)
    except _BROKEN as exc:
        return Parsed(None, (errors.corrupt(api, "cluster", _unreadable(exc)),))
    if not brokers:
        return Parsed(None, (errors.corrupt(api, "cluster", "no brokers in answer"),))

    leaders: dict[TopicPartition, int | None] = {}
    internal: set[str] = set()
    problems: list[RequestError] = []
    for topic in topics:
        name = getattr(topic, "name", None)
        try:
            name = _str(name, "topic name")
            code = _code(topic.error_code)
            if code:
                problems.append(errors.from_code(api, name, code))
                continue
            if topic.is_internal:
                internal.add(name)
            for partition in topic.partitions:
                tp = TopicPartition(name, _int(partition.partition_index, "partition_index"))
                leader = _int(partition.leader_id, "leader_id")
                leaders[tp] = leader if leader >= 0 else None
                code = _code(partition.error_code)
                if code and leaders[tp] is None:
                    problems.append(errors.from_code(api, str(tp), code))
        except _BROKEN as exc:
            problems.append(errors.corrupt(api, str(name), _unreadable(exc)))
    layout = ClusterLayout(brokers=brokers, controller_id=controller if controller >= 0 else None,
                           leaders=leaders, internal_topics=frozenset(internal))
    return Parsed(layout, tuple(problems))


# -- Transactions -----------------------------------------------------------

def parse_list_transactions(response: Any, broker_id: int) -> Parsed[tuple[ListedTransaction, ...] | None]:
    """``None`` when the broker refused the listing: then its ids are unknown, not absent."""
    api, target = "ListTransactions", errors.broker_target(broker_id)
    try:
        code = _code(response.error_code)
        if code:
            return Parsed(None, (errors.from_code(api, target, code),))
        rows = list(response.transaction_states)
    except _BROKEN as exc:
        return Parsed(None, (errors.corrupt(api, target, _unreadable(exc)),))
    listed: list[ListedTransaction] = []
    problems: list[RequestError] = []
    for row in rows:
        try:
            listed.append(ListedTransaction(
                transactional_id=_str(row.transactional_id, "transactional_id"),
                producer_id=_int(row.producer_id, "producer_id"),
                state=TxnState.parse(row.transaction_state if isinstance(row.transaction_state, str) else None),
                coordinator_id=broker_id,
            ))
        except _BROKEN as exc:
            problems.append(errors.corrupt(api, target, _unreadable(exc)))
    return Parsed(tuple(listed), tuple(problems))


def parse_describe_transactions(response: Any, coordinator_id: int) -> Parsed[dict[str, TransactionDescription]]:
    api = "DescribeTransactions"
    try:
        rows = list(response.transaction_states)
    except _BROKEN as exc:
        return Parsed({}, (errors.corrupt(api, errors.broker_target(coordinator_id), _unreadable(exc)),))
    described: dict[str, TransactionDescription] = {}
    problems: list[RequestError] = []
    for row in rows:
        txn_id = getattr(row, "transactional_id", None)
        try:
            txn_id = _str(txn_id, "transactional_id")
            code = _code(row.error_code)
            if code:
                problems.append(errors.from_code(api, txn_id, code))
                continue
            partitions = frozenset(
                TopicPartition(_str(topic.topic, "topic"), _int(p, "partition"))
                for topic in row.topics for p in topic.partitions)
            state = row.transaction_state
            described[txn_id] = TransactionDescription(
                transactional_id=txn_id,
                coordinator_id=coordinator_id,
                state=TxnState.parse(state if isinstance(state, str) else None),
                producer_id=_int(row.producer_id, "producer_id"),
                producer_epoch=_int(row.producer_epoch, "producer_epoch"),
                timeout_ms=_int(row.transaction_timeout_ms, "transaction_timeout_ms"),
                start_time_ms=_timestamp(row.transaction_start_time_ms, "transaction_start_time_ms"),
                partitions=partitions,
            )
        except _BROKEN as exc:
            problems.append(errors.corrupt(api, str(txn_id), _unreadable(exc)))
    return Parsed(described, tuple(problems))


# -- Partitions -------------------------------------------------------------

def _partition_rows(response: Any) -> Iterable[tuple[TopicPartition, Any]]:
    for topic in response.topics:
        name = _str(topic.name, "topic name")
        for partition in topic.partitions:
            index = partition.partition_index
            yield TopicPartition(name, index if index.__class__ is int else _int(index, "partition_index")), partition


def parse_describe_producers(response: Any, broker_id: int) -> Parsed[dict[TopicPartition, tuple[ProducerState, ...]]]:
    api = "DescribeProducers"
    producers: dict[TopicPartition, tuple[ProducerState, ...]] = {}
    problems: list[RequestError] = []
    try:
        for tp, partition in _partition_rows(response):
            try:
                code = _code(partition.error_code)
                if code:
                    problems.append(errors.from_code(api, str(tp), code, getattr(partition, "error_message", None)))
                    continue
                producers[tp] = tuple(_producer_state(p) for p in partition.active_producers)
            except _BROKEN as exc:
                problems.append(errors.corrupt(api, str(tp), _unreadable(exc)))
    except _BROKEN as exc:
        problems.append(errors.corrupt(api, errors.broker_target(broker_id), _unreadable(exc)))
    return Parsed(producers, tuple(problems))


def _producer_state(row: Any) -> ProducerState:
    return ProducerState(
        producer_id=_int(row.producer_id, "producer_id"),
        producer_epoch=_int(row.producer_epoch, "producer_epoch"),
        last_sequence=_int(row.last_sequence, "last_sequence"),
        last_timestamp_ms=_timestamp(row.last_timestamp, "last_timestamp"),
        coordinator_epoch=_int(row.coordinator_epoch, "coordinator_epoch"),
        current_txn_start_offset=_offset(row.current_txn_start_offset, "current_txn_start_offset"),
    )


def parse_list_offsets(response: Any, broker_id: int, spec: str) -> Parsed[dict[TopicPartition, int | None]]:
    """``spec`` names the question (e.g. ``latest/read_committed``) in error messages."""
    api = "ListOffsets"
    offsets: dict[TopicPartition, int | None] = {}
    problems: list[RequestError] = []
    try:
        for tp, partition in _partition_rows(response):
            try:
                code = partition.error_code
                if code.__class__ is not int or code:  # 0 without a call: three answers per partition a poll
                    code = _code(code)
                if code:
                    error = errors.from_code(api, str(tp), code)
                    problems.append(RequestError(api, error.target, error.code, error.name,
                                                 f"{spec}: {error.message}", error.error_class))
                    continue
                offsets[tp] = _offset(partition.offset, "offset")
            except _BROKEN as exc:
                problems.append(errors.corrupt(api, str(tp), f"{spec}: {_unreadable(exc)}"))
    except _BROKEN as exc:
        problems.append(errors.corrupt(api, errors.broker_target(broker_id), f"{spec}: {_unreadable(exc)}"))
    return Parsed(offsets, tuple(problems))


# -- Groups -----------------------------------------------------------------

def parse_list_groups(response: Any, broker_id: int) -> Parsed[tuple[ListedGroup, ...] | None]:
    api, target = "ListGroups", errors.broker_target(broker_id)
    try:
        code = _code(response.error_code)
        if code:
            return Parsed(None, (errors.from_code(api, target, code),))
        rows = list(response.groups)
    except _BROKEN as exc:
        return Parsed(None, (errors.corrupt(api, target, _unreadable(exc)),))
    groups: list[ListedGroup] = []
    problems: list[RequestError] = []
    for row in rows:
        try:
            groups.append(ListedGroup(
                group_id=_str(row.group_id, "group_id"),
                coordinator_id=broker_id,
                state=_optional_str(getattr(row, "group_state", None)),
                protocol_type=_optional_str(getattr(row, "protocol_type", None)),
                group_type=_optional_str(getattr(row, "group_type", None)),
            ))
        except _BROKEN as exc:
            problems.append(errors.corrupt(api, target, _unreadable(exc)))
    return Parsed(tuple(groups), tuple(problems))


def parse_offset_fetch(response: Any, group_id: str | None = None) -> Parsed[dict[str, dict[TopicPartition, int]]]:
    """Committed offsets per group; partitions without a committed offset are left out.

    OffsetFetch v8+ answers for many groups (``response.groups``); older versions
    answer for the one ``group_id`` the request named.
    """
    api = "OffsetFetch"
    problems: list[RequestError] = []
    result: dict[str, dict[TopicPartition, int]] = {}
    try:
        if group_id is None:
            answers = [(_str(g.group_id, "group_id"), g) for g in response.groups]
        else:
            answers = [(group_id, response)]
    except _BROKEN as exc:
        return Parsed({}, (errors.corrupt(api, group_id or "groups", _unreadable(exc)),))
    for gid, answer in answers:
        try:
            code = _code(answer.error_code)
            if code:
                problems.append(errors.from_code(api, gid, code))
                continue
            committed: dict[TopicPartition, int] = {}
            for tp, partition in _partition_rows(answer):
                code = partition.error_code
                if code.__class__ is not int or code:  # 12,000 rows a poll on the lab: 0 without a call
                    code = _code(code)
                if code:
                    error = errors.from_code(api, gid, code)
                    problems.append(RequestError(api, gid, code, error.name, f"{tp}: {error.message}",
                                                 error.error_class))
                    continue
                offset = _offset(partition.committed_offset, "committed_offset")
                if offset is not None:
                    committed[tp] = offset
            result[gid] = committed
        except _BROKEN as exc:
            problems.append(errors.corrupt(api, gid, _unreadable(exc)))
    return Parsed(result, tuple(problems))


# -- Configs and admin ------------------------------------------------------

def parse_int_config(response: Any, broker_id: int, key: str) -> Parsed[int | None]:
    """One integer broker config; ``None`` (with no error) when the broker did not report it."""
    api, target = "DescribeConfigs", errors.broker_target(broker_id)
    try:
        for result in response.results:
            code = _code(result.error_code)
            if code:
                return Parsed(None, (errors.from_code(api, target, code, result.error_message),))
            for entry in result.configs:
                if entry.name == key and entry.value is not None:
                    value = int(entry.value)
                    if value <= 0:
                        raise _Corrupt(f"{key} is {value}")
                    return Parsed(value)
    except _BROKEN as exc:
        return Parsed(None, (errors.corrupt(api, target, _unreadable(exc)),))
    return Parsed(None)


def parse_write_txn_markers(response: Any, tp: TopicPartition, producer_id: int) -> Parsed[bool]:
    """True when the leader wrote the marker for ``tp``."""
    api = "WriteTxnMarkers"
    try:
        for marker in response.markers:
            if _int(marker.producer_id, "producer_id") != producer_id:
                continue
            for topic in marker.topics:
                for partition in topic.partitions:
                    if topic.name == tp.topic and partition.partition_index == tp.partition:
                        code = _code(partition.error_code)
                        if code:
                            return Parsed(False, (errors.from_code(api, str(tp), code),))
                        return Parsed(True)
    except _BROKEN as exc:
        return Parsed(False, (errors.corrupt(api, str(tp), _unreadable(exc)),))
    return Parsed(False, (errors.corrupt(api, str(tp), "answer does not mention the partition"),))
