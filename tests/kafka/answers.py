"""Builders of real kafka-python response objects, as a broker would send them.

Each builder encodes and decodes its answer, so tests parse exactly what comes off
the wire (decoded objects carry versions, defaults and types of the real codec).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kafka.protocol.admin import DescribeConfigsResponse, ListGroupsResponse
from kafka.protocol.admin.transactions import (
    DescribeProducersResponse,
    DescribeTransactionsResponse,
    ListTransactionsResponse,
)
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS
from kafka.protocol.consumer import ListOffsetsResponse, OffsetFetchResponse
from kafka.protocol.metadata import ApiVersionsResponse, MetadataResponse
from kafka.protocol.producer.transaction import WriteTxnMarkersResponse

from txnwatch.core.model import TopicPartition


def wire(response: Any, version: int) -> Any:
    return type(response).decode(response.encode(version=version), version=version)


def metadata(brokers: Iterable[int], leaders: Mapping[TopicPartition, int], *, controller: int = -1,
             internal: Iterable[str] = (), topic_errors: Mapping[str, int] = {},
             partition_errors: Mapping[TopicPartition, int] = {}) -> Any:
    R = MetadataResponse
    T = R.MetadataResponseTopic
    P = T.MetadataResponsePartition
    topics = sorted({tp.topic for tp in leaders} | set(topic_errors))
    return wire(R(
        brokers=[R.MetadataResponseBroker(node_id=n, host="127.0.0.1", port=9000 + n, rack=None) for n in brokers],
        cluster_id="c", controller_id=controller,
        topics=[T(error_code=topic_errors.get(name, 0), name=name, is_internal=name in set(internal),
                  partitions=[P(error_code=partition_errors.get(tp, 0), partition_index=tp.partition,
                                leader_id=leaders[tp], leader_epoch=0, replica_nodes=[], isr_nodes=[],
                                offline_replicas=[])
                              for tp in sorted(leaders) if tp.topic == name])
                for name in topics]), 12)


def list_transactions(rows: Iterable[tuple[str, int, str]], error_code: int = 0) -> Any:
    R = ListTransactionsResponse
    return wire(R(error_code=error_code, unknown_state_filters=[], transaction_states=[
        R.TransactionState(transactional_id=t, producer_id=p, transaction_state=s) for t, p, s in rows]), 1)


def txn(transactional_id: str, *, state: str = "Ongoing", producer_id: int = 1, epoch: int = 0,
        timeout_ms: int = 60_000, start_ms: int = 1_000, partitions: Iterable[TopicPartition] = (),
        error_code: int = 0) -> Any:
    S = DescribeTransactionsResponse.TransactionState
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return S(error_code=error_code, transactional_id=transactional_id, transaction_state=state,
             transaction_timeout_ms=timeout_ms, transaction_start_time_ms=start_ms, producer_id=producer_id,
             producer_epoch=epoch, topics=[S.TopicData(topic=t, partitions=p) for t, p in by_topic.items()])


def describe_transactions(*states: Any) -> Any:
    return wire(DescribeTransactionsResponse(transaction_states=list(states)), 0)


def producer(producer_id: int, *, epoch: int = 0, last_sequence: int = 0, last_timestamp: int = 1_000,
             coordinator_epoch: int = -1, txn_start: int = -1) -> Any:
    return DescribeProducersResponse.TopicResponse.PartitionResponse.ProducerState(
        producer_id=producer_id, producer_epoch=epoch, last_sequence=last_sequence,
        last_timestamp=last_timestamp, coordinator_epoch=coordinator_epoch, current_txn_start_offset=txn_start)


def describe_producers(partitions: Mapping[TopicPartition, list[Any] | int]) -> Any:
    """``partitions`` maps to the producer rows, or to an error code."""
    R = DescribeProducersResponse
    P = R.TopicResponse.PartitionResponse
    topics: dict[str, list[Any]] = {}
    for tp in sorted(partitions):
        value = partitions[tp]
        row = (P(partition_index=tp.partition, error_code=value, error_message=None, active_producers=[])
               if isinstance(value, int) else
               P(partition_index=tp.partition, error_code=0, error_message=None, active_producers=value))
        topics.setdefault(tp.topic, []).append(row)
    return wire(R(topics=[R.TopicResponse(name=t, partitions=p) for t, p in topics.items()]), 0)


def list_offsets(offsets: Mapping[TopicPartition, int], errors: Mapping[TopicPartition, int] = {}) -> Any:
    R = ListOffsetsResponse
    P = R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse
    topics: dict[str, list[Any]] = {}
    for tp in sorted(set(offsets) | set(errors)):
        topics.setdefault(tp.topic, []).append(P(partition_index=tp.partition, error_code=errors.get(tp, 0),
                                                  timestamp=-1, offset=offsets.get(tp, -1), leader_epoch=0))
    return wire(R(topics=[R.ListOffsetsTopicResponse(name=t, partitions=p) for t, p in topics.items()]), 7)


def list_groups(rows: Iterable[tuple[str, ...]], error_code: int = 0) -> Any:
    """rows: (group_id, state, protocol_type[, group_type])."""
    R = ListGroupsResponse
    return wire(R(error_code=error_code, groups=[
        R.ListedGroup(group_id=g, group_state=s, protocol_type=p, group_type=rest[0] if rest else "classic")
        for g, s, p, *rest in rows]), 5)


def offset_fetch(groups: Mapping[str, Mapping[TopicPartition, int] | int]) -> Any:
    """v8 answer; a group maps to its committed offsets or to an error code."""
    R = OffsetFetchResponse
    G = R.OffsetFetchResponseGroup
    T = G.OffsetFetchResponseTopics
    P = T.OffsetFetchResponsePartitions
    answer = []
    for gid, value in groups.items():
        if isinstance(value, int):
            answer.append(G(group_id=gid, topics=[], error_code=value))
            continue
        topics: dict[str, list[Any]] = {}
        for tp in sorted(value):
            topics.setdefault(tp.topic, []).append(P(partition_index=tp.partition, committed_offset=value[tp],
                                                      committed_leader_epoch=-1, metadata="", error_code=0))
        answer.append(G(group_id=gid, topics=[T(name=t, partitions=p) for t, p in topics.items()], error_code=0))
    return wire(R(groups=answer), 8)


def describe_configs(values: Mapping[str, str | None], error_code: int = 0, broker: int = 1) -> Any:
    R = DescribeConfigsResponse
    C = R.DescribeConfigsResult.DescribeConfigsResourceResult
    return wire(R(results=[R.DescribeConfigsResult(
        error_code=error_code, error_message=None, resource_type=4, resource_name=str(broker),
        configs=[C(name=k, value=v, read_only=True, is_default=False, is_sensitive=False)
                 for k, v in values.items()])]), 1)


def write_txn_markers(producer_id: int, tp: TopicPartition, error_code: int = 0) -> Any:
    R = WriteTxnMarkersResponse
    M = R.WritableTxnMarkerResult
    T = M.WritableTxnMarkerTopicResult
    return wire(R(markers=[M(producer_id=producer_id, topics=[T(name=tp.topic, partitions=[
        T.WritableTxnMarkerPartitionResult(partition_index=tp.partition, error_code=error_code)])])]), 1)


def api_versions(release: tuple[int, int] = (4, 1), *, transaction_version: int | None = 2,
                 raise_to: Mapping[int, int] = {}, error_code: int = 0) -> Any:
    """A broker of ``release``: kafka-python's recorded API ranges of that line (``raise_to``: API key -> a higher
    max version, as a newer line serves), and ``transaction.version`` finalized at that level (None: none)."""
    R = ApiVersionsResponse
    if error_code:  # a broker answers an error at v0, whatever was asked (kafka-python decodes it so)
        return wire(R(error_code=error_code, api_keys=[]), 0)
    ranges = {**BROKER_API_VERSIONS[release]}
    for key, highest in raise_to.items():
        ranges[key] = (ranges.get(key, (0, 0))[0], highest)
    features = [] if transaction_version is None else [
        R.FinalizedFeatureKey(name="transaction.version", max_version_level=transaction_version,
                              min_version_level=transaction_version)]
    return wire(R(error_code=error_code, api_keys=[R.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                                                   for k, (lo, hi) in sorted(ranges.items())],
                  throttle_time_ms=0, supported_features=[], finalized_features_epoch=1,
                  finalized_features=features, zk_migration_ready=False), 3)


def find_coordinator(node_id: int, key: str, error_code: int = 0) -> Any:
    from kafka.protocol.metadata import FindCoordinatorResponse as R

    return wire(R(throttle_time_ms=0, coordinators=[R.Coordinator(
        key=key, node_id=node_id, host="127.0.0.1", port=9000 + node_id, error_code=error_code,
        error_message=None)]), 4)


def init_producer_id(producer_id: int = -1, epoch: int = -1, error_code: int = 0) -> Any:
    from kafka.protocol.producer.transaction import InitProducerIdResponse as R

    return wire(R(throttle_time_ms=0, error_code=error_code, producer_id=producer_id, producer_epoch=epoch), 4)
