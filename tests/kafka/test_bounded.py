"""What a broker sends is bounded before it is buffered or decoded (issue 38 items 2 and 3), against a local TCP
server playing a hostile broker (tests/fixtures/hostile_broker.py).

Before: a size field of 2^31-1 followed by zeros took the process from 82 MB to 2.3 GB in 40 s (kafka-python reads
a socket until it is empty), the cluster said only "Unable to bootstrap"; a well-formed ListTransactions answer
of 1,500,000 entries was decoded whole (~1 GB) and the cluster stayed ``up: true, last_error: null``.
"""

from __future__ import annotations

import resource
import struct
import time
from collections.abc import Iterator

import pytest
from kafka.protocol.admin.transactions import ListTransactionsResponse

from tests.fixtures.hostile_broker import (
    API_VERSIONS,
    LIST_TRANSACTIONS,
    METADATA,
    HostileBroker,
    endless_frame,
    list_transactions,
)
from txnwatch.collect.poll_loop import ClusterPollLoop
from txnwatch.core.backoff import Backoff
from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot, ResponseRefused
from txnwatch.core.views import LatestState
from txnwatch.kafka import bounded
from txnwatch.kafka.bounded import EntriesRefused, RefusalLog, _Frames, _reading
from txnwatch.kafka.connection import ClusterConnection
from txnwatch.kafka.settings import ClusterConnectionSettings


def _settings(bootstrap: str, max_response_entries: int = bounded.MAX_RESPONSE_ENTRIES) -> ClusterConnectionSettings:
    return ClusterConnectionSettings(name="evil", bootstrap_servers=(bootstrap,), connect_timeout_ms=3_000,
                                     request_timeout_ms=3_000, max_response_entries=max_response_entries)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.mark.parametrize("api", [pytest.param(API_VERSIONS, id="ApiVersions"), pytest.param(METADATA, id="Metadata")])
def test_a_frame_above_the_bound_is_refused_before_it_is_read(api: int) -> None:
    with HostileBroker(lambda key, _v, _c: endless_frame() if key == api else None) as broker:
        connection = ClusterConnection(_settings(broker.bootstrap))
        before, started = _peak_mb(), time.monotonic()
        with pytest.raises(ResponseRefused) as refused:
            connection.probe()
        connection.close()
    assert time.monotonic() - started < 10
    assert _peak_mb() - before < 50, "nothing of the promised 2 GiB is buffered"
    message = str(refused.value)
    assert f"broker 127.0.0.1:{broker.port}" in message and "2,147,483,647 bytes" in message
    assert ("ApiVersions v" if api == API_VERSIONS else "Metadata v") in message
    assert "max_response_bytes is 25,165,824" in message
    assert {r.reason for r in refused.value.refusals} == {"frame_bytes"}


def test_a_frame_within_the_bound_is_read() -> None:
    frames = _Frames(bound=100)
    assert frames.feed(struct.pack(">i", 100) + bytes(60)) is None
    assert frames.feed(bytes(40) + struct.pack(">i", 3)[:2]) is None  # a size field split across reads
    assert frames.feed(struct.pack(">i", 3)[2:] + b"abc" + struct.pack(">i", 101)) == (1, 101)


def test_an_answer_above_the_entry_bound_is_refused_before_it_is_decoded() -> None:
    answer = list_transactions(0, 1_500_000)  # built before the peak is measured (this process serves it)
    def answering(key: int, _version: int, correlation_id: int) -> Iterator[bytes | memoryview] | None:
        if key != LIST_TRANSACTIONS:
            return None
        head: bytes | memoryview = answer[:4] + struct.pack(">i", correlation_id)
        return iter([head, memoryview(answer)[8:]])

    with HostileBroker(answering) as broker:
        connection = ClusterConnection(_settings(broker.bootstrap))
        before = _peak_mb()
        with pytest.raises(ResponseRefused) as refused:
            connection.poll()
        connection.close()
    # The 16.5 MB frame is read (kafka-python holds it and copies it twice to decode it: ~50 MB for a moment);
    # its 1.5M entries (~400 MB) are never built.
    assert _peak_mb() - before < 70
    message = str(refused.value)
    assert "answered ListTransactions v1 with more than 1,000,000 entries (an array of 1,500,000" in message
    assert f"broker 127.0.0.1:{broker.port} (node 0)" in message


def test_a_refused_answer_makes_the_cluster_down_with_the_refusal_and_counts_it() -> None:
    with HostileBroker(lambda key, _v, c: iter([list_transactions(c, 20_000)]) if key == LIST_TRANSACTIONS
                       else None) as broker:
        settings = _settings(broker.bootstrap, max_response_entries=10_000)
        state = LatestState(["evil"])
        loop = ClusterPollLoop("evil", lambda: ClusterConnection(settings), lambda s, snap, now: (s, Findings(snap.cluster, now)),
                               lambda: None, [], state, backoff=Backoff(base_s=0.0, cap_s=0.0))
        loop.poll_once()
        loop.close()
    view = state.get("evil")
    assert view is not None and not view.up
    assert view.last_error is not None and "more than 10,000 entries" in view.last_error
    assert view.refused == {(f"127.0.0.1:{broker.port} (node 0)", "entries"): 1}


def test_within_the_entry_bound_the_answer_decodes_as_before() -> None:
    frame = list_transactions(5, 3)
    _reading.limit, _reading.broker, _reading.refusals = 10, "b", RefusalLog()
    try:
        decoded = ListTransactionsResponse[1].decode(frame[8 + 1:])  # past the size, correlation id, header tags
        assert [t.producer_id for t in decoded.transaction_states] == [7, 7, 7]
        with pytest.raises(EntriesRefused):
            ListTransactionsResponse[1].decode(list_transactions(5, 11)[9:])
    finally:
        _reading.limit = None
    # A thread that sets no budget (another library's client) decodes without one.
    assert len(ListTransactionsResponse[1].decode(list_transactions(5, 11)[9:]).transaction_states) == 11


def test_the_kafka_python_internals_it_relies_on_are_there() -> None:
    """Canary: the names kafka/bounded.py reaches into (see its docstring)."""
    from kafka.net.manager import KafkaConnectionManager
    from kafka.net.transport import KafkaTCPTransport

    assert hasattr(KafkaTCPTransport, "_sock_recv") and hasattr(KafkaTCPTransport, "_read_from_sock")
    assert hasattr(KafkaConnectionManager, "_build_transport")
    from kafka.protocol.schemas.fields.struct import StructField

    assert StructField.compiled_decode_from is bounded._bounded_compiled_decode_from


def test_other_clusters_keep_polling_beside_a_hostile_one() -> None:
    """One evil and one good cluster in one state, each on its own loop: the good one's poll still succeeds."""
    with HostileBroker(lambda key, _v, _c: endless_frame() if key == METADATA else None) as evil:
        state = LatestState(["evil", "good"])

        class Good:
            def poll(self) -> ClusterSnapshot:
                return ClusterSnapshot(cluster="good", taken_at_ms=int(time.time() * 1000), duration_ms=1)

            def close(self) -> None:
                pass

        evil_loop = ClusterPollLoop("evil", lambda: ClusterConnection(_settings(evil.bootstrap)),
                                    lambda s, snap, now: (s, Findings(snap.cluster, now)), lambda: None, [], state)
        good_loop = ClusterPollLoop("good", Good, lambda s, snap, now: (s, Findings(snap.cluster, now)), lambda: None, [], state)
        evil_loop.poll_once()
        good_loop.poll_once()
        evil_loop.close()
    evil_view, good_view = state.get("evil"), state.get("good")
    assert evil_view is not None and not evil_view.up and "2,147,483,647 bytes" in (evil_view.last_error or "")
    assert good_view is not None and good_view.up
