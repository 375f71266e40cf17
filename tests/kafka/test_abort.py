"""Admin abort: check at the partition leader first, write the marker only for a real open transaction."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kafka.errors import KafkaConnectionError

from tests.kafka import answers as a
from tests.kafka import scripted_wire
from txnwatch.core.model import TopicPartition
from txnwatch.kafka import AbortOutcome, ClusterUnreachable
from txnwatch.kafka.abort import abort_transaction
from txnwatch.kafka.batches import Call

TP = TopicPartition("orders", 0)


class ScriptedWire(scripted_wire.ScriptedWire):
    """Brokers 1 and 2, the partition led by 2, unless a test scripts Metadata itself."""

    def __init__(self, **answers: Callable[[Call], Any]) -> None:
        super().__init__([1, 2], {"Metadata": lambda c: a.metadata([1, 2], {TP: 2}), **answers})

    def supports(self, request_class: Any, version: int) -> bool:
        return True


def open_txn(coordinator_epoch: int = -1, epoch: int = 3) -> Callable[[Call], Any]:
    return lambda call: a.describe_producers({TP: [a.producer(7, epoch=epoch, coordinator_epoch=coordinator_epoch,
                                                             txn_start=40)]})


def run(wire: ScriptedWire, *, epoch: int = 3, coordinator_epoch: int | None = None,
        dry_run: bool = True) -> AbortOutcome:
    return asyncio.run(abort_transaction(wire, "lab", TP, 7, epoch, coordinator_epoch, dry_run))


def test_dry_run_checks_and_writes_nothing() -> None:
    wire = ScriptedWire(DescribeProducers=open_txn())
    outcome = run(wire)
    assert outcome.error is None and not outcome.aborted and outcome.dry_run
    assert (outcome.leader_id, outcome.txn_start_offset) == (2, 40)
    assert outcome.coordinator_epoch == 0, "-1 (never had a marker) becomes 0, as kafka-transactions does"
    assert [c.api for c in wire.calls] == ["Metadata", "DescribeProducers"]
    assert wire.calls[1].node_id == 2


def test_abort_writes_an_abort_marker_to_the_leader() -> None:
    wire = ScriptedWire(DescribeProducers=open_txn(coordinator_epoch=5),
                        WriteTxnMarkers=lambda call: a.write_txn_markers(7, TP))
    outcome = run(wire, dry_run=False)
    assert outcome.aborted and outcome.error is None and outcome.coordinator_epoch == 5
    marker_call = wire.calls[-1]
    [marker] = marker_call.request.markers
    assert marker_call.node_id == 2 and marker.transaction_result is False
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (7, 3, 5)
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("orders", [0])]


def test_explicit_coordinator_epoch_wins() -> None:
    wire = ScriptedWire(DescribeProducers=open_txn(coordinator_epoch=5))
    assert run(wire, coordinator_epoch=9).coordinator_epoch == 9


@pytest.mark.parametrize("producers", [
    lambda call: a.describe_producers({TP: []}),
    lambda call: a.describe_producers({TP: [a.producer(7, epoch=3, txn_start=-1)]}),
])
def test_nothing_open_means_nothing_written(producers: Callable[[Call], Any]) -> None:
    wire = ScriptedWire(DescribeProducers=producers)
    outcome = run(wire, dry_run=False)
    assert not outcome.aborted and outcome.error is not None and outcome.error.name == "NO_SUCH_OPEN_TRANSACTION"
    assert "WriteTxnMarkers" not in [c.api for c in wire.calls]


def test_other_epoch_is_refused_before_writing() -> None:
    wire = ScriptedWire(DescribeProducers=open_txn(epoch=4))
    outcome = run(wire, epoch=3, dry_run=False)
    assert outcome.error is not None and "epoch 4" in outcome.error.message
    assert "WriteTxnMarkers" not in [c.api for c in wire.calls]


def test_marker_refused_by_the_leader() -> None:
    wire = ScriptedWire(DescribeProducers=open_txn(),
                        WriteTxnMarkers=lambda call: a.write_txn_markers(7, TP, error_code=47))
    outcome = run(wire, dry_run=False)
    assert not outcome.aborted and outcome.error is not None and outcome.error.name == "INVALID_PRODUCER_EPOCH"


def test_unknown_partition() -> None:
    wire = ScriptedWire(Metadata=lambda call: a.metadata([1, 2], {}, topic_errors={"orders": 3}))
    outcome = run(wire)
    assert outcome.leader_id is None and outcome.error is not None
    assert outcome.error.name == "UNKNOWN_TOPIC_OR_PARTITION"


def test_cluster_unreachable() -> None:
    def down(call: Call) -> Any:
        raise KafkaConnectionError("refused")

    with pytest.raises(ClusterUnreachable):
        run(ScriptedWire(Metadata=down))


def by_start(start_offset: int, dry_run: bool = False) -> Callable[[ScriptedWire], AbortOutcome]:
    return lambda wire: asyncio.run(abort_transaction(wire, "lab", TP, None, None, None, dry_run, start_offset))


def test_start_offset_names_the_producer_as_kafkas_tool_does() -> None:
    """`kafka-transactions.sh abort --start-offset`: the leader's open transaction starting there gives the producer."""
    wire = ScriptedWire(DescribeProducers=lambda call: a.describe_producers({TP: [
        a.producer(5, epoch=1, txn_start=10), a.producer(7, epoch=3, txn_start=40), a.producer(9, epoch=2)]}),
        WriteTxnMarkers=lambda call: a.write_txn_markers(7, TP))
    outcome = by_start(40)(wire)
    assert outcome.aborted and outcome.error is None
    assert (outcome.producer_id, outcome.producer_epoch, outcome.txn_start_offset) == (7, 3, 40)
    [marker] = wire.calls[-1].request.markers
    assert (marker.producer_id, marker.producer_epoch, marker.transaction_result) == (7, 3, False)


@pytest.mark.parametrize(("producers", "why"), [
    pytest.param([a.producer(7, epoch=3, txn_start=41)], "no open transaction starts at offset 40", id="none-there"),
    pytest.param([a.producer(7, epoch=3, txn_start=40), a.producer(8, epoch=0, txn_start=40)],
                 "2 open transactions start at offset 40", id="ambiguous"),
])
def test_start_offset_without_exactly_one_open_transaction_writes_nothing(producers: list[Any], why: str) -> None:
    wire = ScriptedWire(DescribeProducers=lambda call: a.describe_producers({TP: producers}))
    outcome = by_start(40)(wire)
    assert outcome.error is not None and why in outcome.error.message and outcome.producer_id == -1
    assert "WriteTxnMarkers" not in [c.api for c in wire.calls]


@pytest.mark.parametrize("version", [
    pytest.param(1, id="v1-kafka-3.x-to-4.1"),
    pytest.param(2, id="v2-kip-1228-kafka-4.2+"),
])
def test_marker_on_the_wire_is_legacy_at_the_producers_epoch(version: int) -> None:
    """KIP-1228: a leader serving WriteTxnMarkers v2 checks a TV2 marker's epoch strictly above the producer's
    (Kafka 4.4.0's ProducerAppendInfo.checkProducerEpoch), a legacy one at or above it.  The abort knows only the
    producer's epoch (DescribeProducers), so whatever version kafka-python negotiates with the leader, the bytes
    must say transaction version 0 at epoch 3, as Kafka's own AbortTransactionHandler writes them."""
    wire = ScriptedWire(DescribeProducers=open_txn(coordinator_epoch=5),
                        WriteTxnMarkers=lambda call: a.write_txn_markers(7, TP))
    run(wire, dry_run=False)
    request = wire.calls[-1].request
    assert request.min_version <= version <= request.max_version
    [marker] = type(request).decode(bytes(request.encode(version=version)), version=version).markers
    assert (marker.producer_id, marker.producer_epoch, marker.coordinator_epoch) == (7, 3, 5)
    assert marker.transaction_version == 0
    assert [(t.name, t.partition_indexes) for t in marker.topics] == [("orders", [0])]


def test_kafka_python_keeps_the_transaction_version_it_is_given() -> None:
    """Canary: were kafka-python to drop or rewrite the field, a v2 marker could claim TV2 at the producer's own
    epoch, which a 4.2+ leader refuses with INVALID_PRODUCER_EPOCH."""
    from kafka.protocol.producer.transaction import WriteTxnMarkersRequest

    marker = WriteTxnMarkersRequest.WritableTxnMarker(producer_id=7, producer_epoch=3, transaction_result=False,
                                                      topics=[], coordinator_epoch=5, transaction_version=2)
    encoded = bytes(WriteTxnMarkersRequest(markers=[marker]).encode(version=2))
    assert WriteTxnMarkersRequest.decode(encoded, version=2).markers[0].transaction_version == 2
    assert WriteTxnMarkersRequest.max_version == 2, "a v3 would need reading before the abort uses it"
