"""Canary for kafka/encoded.py: the kept request bytes are kafka-python's own, at every version, every send.

The stand-in leans on what kafka-python's connection does with a request when it sends it (version
negotiation, header, encode, in-flight header); these tests send it and a freshly built kafka-python
request through kafka-python's own protocol parser and compare what goes on the wire.
"""

from __future__ import annotations

from typing import Any

import kafka.errors as Errors
import pytest
from kafka.protocol.admin.transactions import DescribeProducersRequest
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.parser import KafkaProtocol

from txnwatch.core.model import TopicPartition
from txnwatch.kafka import batches
from txnwatch.kafka.encoded import EncodedRequest, RequestMemo

LEADERS = {**{TopicPartition("orders", p): 1 + p % 3 for p in range(12)},
           **{TopicPartition("payments", p): 1 + p % 2 for p in range(5)},
           TopicPartition("__consumer_offsets", 7): 3}
MOVED = {**LEADERS, TopicPartition("orders", 0): 2}  # one leader change: nodes 1 and 2 ask other partitions
TIMEOUT_MS = 30_000


def cached_and_fresh(memo: RequestMemo, leaders: dict[TopicPartition, int]) -> list[tuple[Any, Any]]:
    """(stand-in, kafka-python request) pairs for the same calls, as the poll builds them."""
    cached = [*batches.describe_producers(leaders, memo), *batches.list_offsets(leaders, timeout_ms=TIMEOUT_MS,
                                                                                memo=memo)]
    fresh = [*batches.describe_producers(leaders), *batches.list_offsets(leaders, timeout_ms=TIMEOUT_MS)]
    assert [(c.api, c.node_id, c.variant) for c in cached] == [(f.api, f.node_id, f.variant) for f in fresh]
    return [(c.request, f.request) for c, f in zip(cached, fresh, strict=True)]


def versions(request: Any) -> range:
    lowest = max(request._min_version or 0, type(request).min_version)
    return range(lowest, type(request).max_version + 1)


def sent(request: Any, version: int, parser: KafkaProtocol) -> tuple[bytes, Any]:
    """What kafka-python's parser writes for ``request`` at ``version``, and the header it keeps in flight."""
    request.API_VERSION = version
    parser.send_request(request)
    return bytes(parser.send_bytes()), parser.in_flight_requests[-1]


def header_fields(header: Any) -> tuple[Any, ...]:
    return (header.request_api_key, header.request_api_version, header.correlation_id, header.client_id,
            header.get_response_class())


def test_the_bytes_on_the_wire_are_kafka_pythons_own_at_every_version() -> None:
    memo = RequestMemo()
    memo.start_poll()
    pairs = cached_and_fresh(memo, LEADERS)
    assert all(isinstance(c, EncodedRequest) for c, _ in pairs)
    checked = 0
    for cached, fresh in pairs:
        for version in versions(fresh):
            # Each send gets its own parser state on both sides: same client id, same correlation id.
            ours, theirs = KafkaProtocol(client_id="txnwatch-canary"), KafkaProtocol(client_id="txnwatch-canary")
            ours._correlation_id = theirs._correlation_id = 41 + version
            stand_in = EncodedRequest(cached._body)
            wire_ours, header_ours = sent(stand_in, version, ours)
            wire_theirs, header_theirs = sent(fresh, version, theirs)
            assert wire_ours == wire_theirs, (type(fresh).__name__, version)
            assert header_fields(header_ours) == header_fields(header_theirs)
            checked += 1
    # Per leader (3): DescribeProducers v0; ListOffsets v2-v11 for the two "latest" questions (v2 brought the
    # isolation level), v0-v11 for the log start: every version kafka-python 3.0.12 knows.
    assert checked >= 3 * (1 + 10 + 10 + 12)


def test_every_send_gets_its_own_correlation_id_and_header() -> None:
    memo = RequestMemo()
    memo.start_poll()
    first = batches.list_offsets(LEADERS, timeout_ms=TIMEOUT_MS, memo=memo)[0].request
    memo.start_poll()
    again = batches.list_offsets(LEADERS, timeout_ms=TIMEOUT_MS, memo=memo)[0].request
    parser = KafkaProtocol(client_id="txnwatch")
    wire_first, header_first = sent(first, 9, parser)
    wire_again, header_again = sent(again, 9, parser)
    assert (header_first.correlation_id, header_again.correlation_id) == (1, 2)
    # Frame size and API key/version the same; the correlation id (bytes 8-12) differs; the body is the same.
    assert wire_first[:8] == wire_again[:8]
    assert wire_first[8:12] == (1).to_bytes(4, "big") and wire_again[8:12] == (2).to_bytes(4, "big")
    assert wire_first[12:] == wire_again[12:]


@pytest.mark.parametrize("broker_max", [
    pytest.param({ListOffsetsRequest.API_KEY: (0, 10), DescribeProducersRequest.API_KEY: (0, 0)}, id="kafka-4.1"),
    pytest.param({ListOffsetsRequest.API_KEY: (0, 5), DescribeProducersRequest.API_KEY: (0, 0)}, id="kafka-2.x"),
    pytest.param({ListOffsetsRequest.API_KEY: (0, 1)}, id="too-old-for-either"),
])
def test_version_negotiation_answers_as_for_kafka_pythons_request(broker_max: dict[int, tuple[int, int]]) -> None:
    memo = RequestMemo()
    memo.start_poll()
    broker = BrokerVersionData(api_versions=broker_max)
    for cached, fresh in cached_and_fresh(memo, LEADERS):
        outcomes = []
        for request in (cached, fresh):
            try:
                outcomes.append(broker.api_version(request))
            except Errors.IncompatibleBrokerVersion as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], type(fresh).__name__


def test_a_question_asked_again_is_not_rebuilt_and_a_moved_leader_is() -> None:
    memo = RequestMemo()
    memo.start_poll()
    first = {(id(c.request._body), c.node_id, c.variant) for c in batches.list_offsets(LEADERS, memo=memo)}
    memo.start_poll()
    again = {(id(c.request._body), c.node_id, c.variant) for c in batches.list_offsets(LEADERS, memo=memo)}
    assert again == first
    memo.start_poll()
    moved = batches.list_offsets(MOVED, memo=memo)
    kept = {(id(c.request._body), c.node_id, c.variant) for c in moved} & first
    assert {node for _, node, _ in kept} == {3}  # only node 3's partitions are as before
    for cached, fresh in zip(moved, batches.list_offsets(MOVED), strict=True):
        fresh_bytes = bytes(fresh.request.encode(version=9))
        assert cached.request.encode(version=9) == fresh_bytes


def test_a_question_not_asked_for_a_whole_poll_is_forgotten() -> None:
    memo = RequestMemo()
    memo.start_poll()
    batches.describe_producers(LEADERS, memo)
    assert len(memo) == 3
    memo.start_poll()
    batches.describe_producers({TopicPartition("orders", 0): 1}, memo)
    memo.start_poll()
    assert len(memo) == 0 and not memo._previous.keys() - {("DescribeProducers", (("orders", (0,)),))}


def test_the_stand_in_reads_as_the_request_it_stands_for() -> None:
    memo = RequestMemo()
    memo.start_poll()
    for cached, fresh in cached_and_fresh(memo, LEADERS):
        assert cached.topics == fresh.topics
        assert repr(cached) == repr(fresh)
        assert cached.expect_response() is fresh.expect_response() is True
