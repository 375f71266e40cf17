"""Properties over random snapshot sequences: detection never raises and never cries wolf."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from txnwatch.detect import INITIAL, DetectionSettings, evaluate
from txnwatch.model import (ClusterSnapshot, GroupSnapshot, ListedTransaction, PartitionSnapshot, ProducerState,
                            TopicPartition, TransactionDescription, TxnState)

TPS = [TopicPartition("t", i) for i in range(3)]
PIDS = [1, 2, 3]


@st.composite
def snapshots(draw: st.DrawFn, at: int) -> ClusterSnapshot:
    txns: dict[str, TransactionDescription] = {}
    for pid in draw(st.sets(st.sampled_from(PIDS))):
        txns[f"id-{pid}"] = TransactionDescription(
            f"id-{pid}", coordinator_id=draw(st.sampled_from([1, 2])), state=draw(st.sampled_from(list(TxnState))),
            producer_id=pid, producer_epoch=draw(st.integers(0, 5)), timeout_ms=draw(st.integers(1_000, 60_000)),
            start_time_ms=draw(st.none() | st.integers(0, at)),
            partitions=frozenset(draw(st.sets(st.sampled_from(TPS)))))
    partitions = {}
    for tp in TPS:
        hwm = draw(st.none() | st.integers(0, 1000))
        lso = None if hwm is None else draw(st.none() | st.integers(0, hwm))
        producers = draw(st.none() | st.lists(st.builds(
            ProducerState, producer_id=st.sampled_from(PIDS), producer_epoch=st.integers(0, 5),
            last_sequence=st.integers(-1, 100), last_timestamp_ms=st.none() | st.integers(0, at),
            coordinator_epoch=st.integers(-1, 3), current_txn_start_offset=st.none() | st.integers(0, 1000)),
            max_size=3).map(tuple))
        partitions[tp] = PartitionSnapshot(tp, 1, hwm, lso, 0, producers)
    unreachable = frozenset(draw(st.sets(st.sampled_from([1, 2]))))
    listed = tuple(ListedTransaction(t.transactional_id, t.producer_id, t.state, t.coordinator_id)
                   for t in txns.values())
    # An unreachable coordinator answered nothing: its ids may be listed but are never described.
    txns = {k: t for k, t in txns.items() if t.coordinator_id not in unreachable}
    groups = {"g": GroupSnapshot("g", "Stable", "consumer", {tp: draw(st.integers(0, 1000)) for tp in TPS})}
    return ClusterSnapshot("c", at, 1, listed=listed, transactions=txns, partitions=partitions, groups=groups,
                           listing_complete=draw(st.booleans()), unreachable_coordinators=unreachable,
                           max_transaction_timeout_ms=draw(st.integers(0, 20_000)))


@st.composite
def sequences(draw: st.DrawFn) -> list[ClusterSnapshot]:
    times = sorted(draw(st.lists(st.integers(0, 200_000), min_size=1, max_size=6)))
    return [draw(snapshots(t)) for t in times]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequences())
def test_never_raises_and_never_false_hanging(seq: list[ClusterSnapshot]) -> None:
    state = INITIAL
    for snap in seq:
        state, findings = evaluate(state, snap, snap.taken_at_ms, DetectionSettings(lso_stall_ms=1_000))
        for h in findings.hanging:
            # The coordinator listed this partition for this producer: never hanging.
            for txn_id in snap.transactional_ids_for_producer(h.producer_id):
                described = snap.transactions.get(txn_id)
                if described is not None:
                    assert h.tp not in described.partitions
            # A coordinator that could not be asked never produces a hanging verdict.
            if h.coordinator_id is not None:
                assert h.coordinator_id not in snap.unreachable_coordinators
            if h.transactional_id is None:
                assert snap.listing_complete
        for stall in findings.lso_stalls:
            partition = snap.partitions[stall.tp]
            assert partition.last_stable_offset is None or partition.last_stable_offset == stall.stalled_lso
        for row in findings.lags:
            assert (row.lag_lso is None or row.lag_lso >= 0) and (row.lag_hwm is None or row.lag_hwm >= 0)
