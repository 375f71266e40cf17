"""Properties over random snapshot sequences: detection never raises and never cries wolf."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fixtures.lanes import examples
from txnwatch.core.findings import Findings
from txnwatch.core.model import (
    ClusterSnapshot,
    GroupSnapshot,
    ListedTransaction,
    PartitionSnapshot,
    ProducerState,
    RequestError,
    TopicPartition,
    TransactionDescription,
    TxnState,
)
from txnwatch.detect import INITIAL, DetectionSettings, evaluate

TPS = [TopicPartition("t", i) for i in range(3)]
PIDS = [1, 2, 3]
COORDINATORS = [1, 2]
SETTINGS = DetectionSettings(lso_stall_ms=1_000, verification_grace_ms=500, prepare_stuck_ms=1_000)
EXAMPLES = settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def snapshots(draw: st.DrawFn, at: int, blackout: bool = False) -> ClusterSnapshot:
    unreachable = frozenset(COORDINATORS if blackout else draw(st.sets(st.sampled_from(COORDINATORS))))
    coherent = draw(st.booleans())  # real polls never hold descriptions from coordinators that failed
    listed: list[ListedTransaction] = []
    txns: dict[str, TransactionDescription] = {}
    errors: list[RequestError] = []
    for pid in draw(st.sets(st.sampled_from(PIDS))):
        txn_id, coordinator = f"id-{pid}", draw(st.sampled_from(COORDINATORS))
        state = draw(st.sampled_from(list(TxnState)))
        listed.append(ListedTransaction(txn_id, pid, state, coordinator))
        answer = draw(st.sampled_from(["described", "not_found", "error", "silent"]))
        if coherent and coordinator in unreachable:
            continue
        if answer == "described":
            txns[txn_id] = TransactionDescription(
                txn_id, coordinator_id=coordinator, state=state,
                producer_id=draw(st.sampled_from([pid, pid, pid, 99])), producer_epoch=draw(st.integers(0, 5)),
                timeout_ms=draw(st.integers(1_000, 60_000)), start_time_ms=draw(st.none() | st.integers(0, at)),
                partitions=frozenset(draw(st.sets(st.sampled_from(TPS)))))
        elif answer == "not_found":
            errors.append(RequestError("DescribeTransactions", txn_id, 105, "TRANSACTIONAL_ID_NOT_FOUND"))
        elif answer == "error":
            errors.append(RequestError("DescribeTransactions", txn_id, 15, "COORDINATOR_NOT_AVAILABLE"))
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
    groups = {"g": GroupSnapshot("g", "Stable", "consumer", {tp: draw(st.integers(-1, 1000)) for tp in TPS})}
    return ClusterSnapshot("c", at, 1, listed=tuple(listed), transactions=txns, partitions=partitions, groups=groups,
                           errors=tuple(errors), listing_complete=draw(st.booleans()),
                           unreachable_coordinators=unreachable,
                           max_transaction_timeout_ms=draw(st.integers(0, 20_000)))


@st.composite
def sequences(draw: st.DrawFn, blackout: bool = False) -> list[ClusterSnapshot]:
    times = sorted(draw(st.lists(st.integers(0, 200_000), min_size=1, max_size=6)))
    return [draw(snapshots(t, blackout)) for t in times]


def _run(seq: list[ClusterSnapshot]) -> list[Findings]:
    state, out = INITIAL, []
    for snap in seq:
        state, findings = evaluate(state, snap, snap.taken_at_ms, SETTINGS)
        out.append(findings)
    return out


def _coordinator_vouches(snap: ClusterSnapshot, tp: TopicPartition, producer_id: int) -> bool:
    """The coordinator lists this partition in this producer id's transaction."""
    for txn_id in snap.transactional_ids_for_producer(producer_id):
        described = snap.transactions.get(txn_id)
        if described is not None and described.producer_id == producer_id and tp in described.partitions:
            return True
    return False


@EXAMPLES
@given(sequences())
def test_hanging_verdicts_only_on_evidence(seq: list[ClusterSnapshot]) -> None:
    for snap, findings in zip(seq, _run(seq), strict=False):
        undetermined = {(u.tp, u.producer_id) for u in findings.undetermined}
        for h in findings.hanging:
            assert not _coordinator_vouches(snap, h.tp, h.producer_id)
            assert h.age_ms > snap.max_transaction_timeout_ms + SETTINGS.hanging_margin_ms
            assert (h.tp, h.producer_id) not in undetermined
            listings = [t for t in snap.listed if t.producer_id == h.producer_id]
            # Nothing about an unreachable coordinator, or an incomplete listing, is ever evidence.
            assert not any(t.coordinator_id in snap.unreachable_coordinators for t in listings)
            assert listings or snap.listing_complete
            assert snap.partitions[h.tp].producers is not None


@EXAMPLES
@given(sequences(blackout=True))
def test_no_coordinator_answering_means_no_hanging_verdict_but_for_unlisted_producers(
        seq: list[ClusterSnapshot]) -> None:
    """Even answers that contradict the failure (a description, TRANSACTIONAL_ID_NOT_FOUND) are not evidence."""
    for snap, findings in zip(seq, _run(seq), strict=False):
        for h in findings.hanging:
            assert snap.listing_complete and not snap.transactional_ids_for_producer(h.producer_id)


@EXAMPLES
@given(sequences())
def test_episodes_samples_and_lags_are_consistent(seq: list[ClusterSnapshot]) -> None:
    for snap, findings in zip(seq, _run(seq), strict=False):
        for stall in findings.lso_stalls:
            assert stall.last_seen_ms - stall.started_ms >= SETTINGS.lso_stall_ms
            partition = snap.partitions.get(stall.tp)
            if partition is not None and partition.last_stable_offset is not None:
                assert partition.last_stable_offset == stall.stalled_lso
                assert partition.high_watermark is not None and stall.stalled_lso < partition.high_watermark
        assert set(findings.lso_stalls_opened) <= set(findings.lso_stalls)
        assert not {s.tp for s in findings.lso_stalls} & {s.tp for s in findings.lso_stalls_ended}
        assert 0 <= findings.verification.failures <= findings.verification.checks
        for row in findings.lags:
            assert row.committed >= 0
            assert (row.lag_lso is None or row.lag_lso >= 0) and (row.lag_hwm is None or row.lag_hwm >= 0)
            assert row.lag_seconds is None or row.lag_seconds >= 0
        for stuck in findings.stuck_prepare:
            assert stuck.duration_ms > SETTINGS.prepare_stuck_ms and stuck.state.is_prepare


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sequences())
def test_detection_is_a_pure_function_of_its_inputs(seq: list[ClusterSnapshot]) -> None:
    assert _run(seq) == _run(seq)
