"""Requests of one poll, batched per broker: pure builders, no I/O.

Every builder returns at most one request per broker (per question asked), carrying
all the partitions, transactional ids or groups that broker answers for.  That is
what keeps a poll at a fixed number of round trips however many objects it covers.

Request objects are built fresh for every call: kafka-python stamps the negotiated
API version onto the instance when it is sent.  The questions asked again at every poll while leaders
stay put (ListOffsets, DescribeProducers) can instead come from a :class:`~txnwatch.kafka.encoded.RequestMemo`:
a fresh stand-in per call, carrying bytes encoded at an earlier poll.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import DescribeConfigsRequest, ListGroupsRequest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.consumer import ListOffsetsRequest, OffsetFetchRequest
from kafka.protocol.consumer.offsets import IsolationLevel, OffsetSpec
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

from txnwatch.core.model import TopicPartition
from txnwatch.kafka.encoded import RequestMemo

MAX_TIMEOUT_CONFIG = "transaction.max.timeout.ms"
_BROKER_RESOURCE = 4  # ConfigResource.Type.BROKER
# v8 is the first to batch groups and the last to name topics rather than topic ids.
_OFFSET_FETCH_VERSION = 8


@dataclass(frozen=True, slots=True, eq=False)
class Call:
    """One request for one broker.

    ``api`` is the Kafka API name (and the ``RequestError.api`` if the call fails);
    ``variant`` tells apart calls of one API with different questions: the offset
    spec of a ListOffsets, the group of a pre-v8 OffsetFetch.
    """

    api: str
    node_id: int
    request: Any
    variant: str = ""


@dataclass(frozen=True, slots=True)
class OffsetQuery:
    """One ListOffsets question: which offset, under which isolation level."""

    name: str
    timestamp: int
    isolation_level: int


HIGH_WATERMARK = OffsetQuery("latest/read_uncommitted", OffsetSpec.LATEST, IsolationLevel.READ_UNCOMMITTED)
LAST_STABLE = OffsetQuery("latest/read_committed", OffsetSpec.LATEST, IsolationLevel.READ_COMMITTED)
LOG_START = OffsetQuery("earliest", OffsetSpec.EARLIEST, IsolationLevel.READ_UNCOMMITTED)
OFFSET_QUERIES = (HIGH_WATERMARK, LAST_STABLE, LOG_START)


def by_node(partitions: Mapping[TopicPartition, int]) -> dict[int, dict[str, list[int]]]:
    """Partitions grouped by their leader, then by topic, in a stable order."""
    grouped: dict[int, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    for tp in sorted(partitions):
        grouped[partitions[tp]][tp.topic].append(tp.partition)
    return {node: dict(topics) for node, topics in grouped.items()}


def metadata(node_id: int, topics: Sequence[str] | None = None) -> Call:
    """Brokers and leaders of ``topics`` (default: every topic, internal ones included)."""
    wanted = (MetadataRequest.ALL_TOPICS if topics is None else
              [MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    return Call("Metadata", node_id, MetadataRequest(topics=wanted, allow_auto_topic_creation=False))


#: ListTransactions v2 (Kafka 4.1, KIP-1152) carries TransactionalIdPattern.
LIST_TRANSACTIONS_PATTERN_VERSION = 2


def list_transactions(broker_ids: Iterable[int], id_pattern: str | None = None) -> list[Call]:
    """Every id each broker coordinates; with ``id_pattern``, only those it matches as a whole.

    The pattern is sent only where the caller knows the broker speaks v2: the request is then pinned
    to v2 so kafka-python cannot quietly fall back to a version without the field.  The caller
    filters the answer too (core/idpattern.py), so an older broker's full listing ends the same.
    """
    def request() -> ListTransactionsRequest:
        if id_pattern is None:
            return ListTransactionsRequest(state_filters=[], producer_id_filters=[])
        return ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                       transactional_id_pattern=id_pattern,
                                       min_version=LIST_TRANSACTIONS_PATTERN_VERSION)
    return [Call("ListTransactions", node, request(), "pattern" if id_pattern is not None else "")
            for node in broker_ids]


def list_groups(broker_ids: Iterable[int]) -> list[Call]:
    return [Call("ListGroups", node, ListGroupsRequest()) for node in broker_ids]


def describe_producers(leaders: Mapping[TopicPartition, int], memo: RequestMemo | None = None) -> list[Call]:
    topic = DescribeProducersRequest.TopicRequest
    calls = []
    for node, topics in by_node(leaders).items():
        def build(topics: dict[str, list[int]] = topics) -> DescribeProducersRequest:
            return DescribeProducersRequest(
                topics=[topic(name=name, partition_indexes=parts) for name, parts in topics.items()])
        request = build() if memo is None else memo.request(("DescribeProducers", _frozen(topics)), build)
        calls.append(Call("DescribeProducers", node, request))
    return calls


def list_offsets(leaders: Mapping[TopicPartition, int], queries: Sequence[OffsetQuery] = OFFSET_QUERIES,
                 timeout_ms: int = 0, memo: RequestMemo | None = None) -> list[Call]:
    """``timeout_ms`` bounds lookups in tiered storage (ListOffsets v10+); local logs answer at once."""
    topic = ListOffsetsRequest.ListOffsetsTopic
    partition = topic.ListOffsetsPartition
    calls = []
    for node, topics in by_node(leaders).items():
        # Questions with the same timestamp (the high watermark and the LSO: both "latest") share one topic list:
        # a request only reads it when encoded (issue 25: 2,000 partition entries fewer to build every poll).
        # Not with a memo: it keeps the builders, and a kept list would outlive the poll for nothing.
        shared: dict[int, list[Any]] | None = {} if memo is None else None
        frozen = None if memo is None else _frozen(topics)
        for query in queries:
            def build(query: OffsetQuery = query, topics: dict[str, list[int]] = topics,
                      shared: dict[int, list[Any]] | None = shared) -> ListOffsetsRequest:
                timestamp = int(query.timestamp)
                entries = None if shared is None else shared.get(timestamp)
                if entries is None:
                    entries = [topic(name=name, partitions=[partition(partition_index=p, timestamp=timestamp)
                                                            for p in parts])
                               for name, parts in topics.items()]
                    if shared is not None:
                        shared[timestamp] = entries
                min_version = max(ListOffsetsRequest.min_version_for_isolation_level(query.isolation_level),
                                  ListOffsetsRequest.min_version_for_timestamp(query.timestamp))
                return ListOffsetsRequest(isolation_level=int(query.isolation_level), topics=entries,
                                          timeout_ms=timeout_ms, min_version=min_version)
            request = build() if memo is None else memo.request(("ListOffsets", query, timeout_ms, frozen), build)
            calls.append(Call("ListOffsets", node, request, query.name))
    return calls


def _frozen(topics: Mapping[str, Sequence[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """A leader's partitions as a memo key: the request carries exactly these, in this order."""
    return tuple((name, tuple(parts)) for name, parts in topics.items())


def describe_transactions(ids_by_coordinator: Mapping[int, Sequence[str]]) -> list[Call]:
    return [Call("DescribeTransactions", node, DescribeTransactionsRequest(transactional_ids=list(ids)))
            for node, ids in sorted(ids_by_coordinator.items()) if ids]


def offset_fetch(groups_by_coordinator: Mapping[int, Sequence[str]], *, batched: bool) -> list[Call]:
    """All committed offsets of each group: one request per coordinator on OffsetFetch v8+,
    one per group before (brokers older than Kafka 3.0)."""
    calls = []
    for node, group_ids in sorted(groups_by_coordinator.items()):
        if not group_ids:
            continue
        if batched:
            group = OffsetFetchRequest.OffsetFetchRequestGroup
            calls.append(Call("OffsetFetch", node, OffsetFetchRequest(
                groups=[group(group_id=g, topics=None) for g in group_ids],
                require_stable=False, min_version=_OFFSET_FETCH_VERSION, max_version=_OFFSET_FETCH_VERSION)))
        else:
            calls.extend(Call("OffsetFetch", node, OffsetFetchRequest(
                group_id=g, topics=None, min_version=2, max_version=_OFFSET_FETCH_VERSION - 1), g)
                for g in group_ids)
    return calls


def describe_broker_config(node_id: int, *keys: str) -> Call:
    resource = DescribeConfigsRequest.DescribeConfigsResource
    return Call("DescribeConfigs", node_id, DescribeConfigsRequest(
        resources=[resource(resource_type=_BROKER_RESOURCE, resource_name=str(node_id),
                            configuration_keys=list(keys))],
        include_synonyms=False))


#: WriteTxnMarkers v2 (KIP-1228, Kafka 4.2) names the marker's transaction version.  A leader checks a
#: transaction-version-2 marker's epoch strictly above the producer's (the coordinator bumps it when it ends a
#: TV2 transaction), any other marker's epoch at or above it.  An administrative abort knows only the epoch the
#: leader reports (DescribeProducers), so it writes a legacy marker at that epoch, as Kafka's own
#: AbortTransactionHandler does (4.3.1 and 4.4.0 leave TransactionVersion at its default 0): every line from 3.x
#: to 4.4 accepts it, and it does not raise the partition's producer epoch over a producer still alive at it.
ABORT_MARKER_TRANSACTION_VERSION = 0
#: v0 was removed in Kafka 4.0 and 3.x serves v1; kafka-python picks the highest of these the leader serves (its
#: ApiVersions), which only changes whether the field above is sent, never what the leader checks.
ABORT_MARKER_VERSIONS = (1, 2)


def abort_marker(leader: int, tp: TopicPartition, producer_id: int, producer_epoch: int,
                 coordinator_epoch: int) -> Call:
    """An ABORT marker for one partition, as ``kafka-transactions.sh abort`` writes it: the producer's own epoch,
    legacy transaction version (see ABORT_MARKER_TRANSACTION_VERSION)."""
    marker = WriteTxnMarkersRequest.WritableTxnMarker
    topic = marker.WritableTxnMarkerTopic
    lowest, highest = ABORT_MARKER_VERSIONS
    return Call("WriteTxnMarkers", leader, WriteTxnMarkersRequest(markers=[marker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=False,
        topics=[topic(name=tp.topic, partition_indexes=[tp.partition])],
        coordinator_epoch=coordinator_epoch, transaction_version=ABORT_MARKER_TRANSACTION_VERSION)],
        min_version=lowest, max_version=highest))
