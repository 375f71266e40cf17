"""evaluate(): the composition the collector calls once per poll."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.detect.builders import MAX_TIMEOUT, TP, TP1, partition, producer, snapshot, txn
from txnwatch.core.findings import Findings
from txnwatch.core.model import GroupSnapshot, HangingReason, TxnState
from txnwatch.detect import INITIAL, DetectionSettings, evaluate, event_counts
from txnwatch.detect import lso as lso_detect

S = DetectionSettings(lso_stall_ms=30_000, prepare_stuck_ms=30_000, verification_grace_ms=10_000)


def _polls() -> list:
    """A transaction opens on TP at offset 10 and never ends; the coordinator only knows TP1."""
    def at(ms: int, hwm: int, state: TxnState = TxnState.ONGOING):
        return snapshot(at=ms, partitions=(partition(hwm=hwm, lso=10, producers=(producer(start=10, last_ms=0),)),),
                        txns=(txn(state=state, partitions=(TP1,), start=0, timeout=60_000),),
                        groups=(GroupSnapshot("g", "Stable", "consumer", {TP: 10}),))
    return [at(0, 20), at(15_000, 30), at(31_000, 40), at(MAX_TIMEOUT + 1, 50)]


def _run(polls: list) -> list[Findings]:
    state, out = INITIAL, []
    for snap in polls:
        state, findings = evaluate(state, snap, snap.taken_at_ms, S)
        out.append(findings)
    return out


def test_a_poll_sequence_tells_the_whole_story() -> None:
    first, second, third, last = _run(_polls())
    assert [t.events for t in first.transitions] == [("new",)] and first.cluster == "c"
    assert second.transitions == () and second.lso_stalls == ()
    (stall,) = third.lso_stalls
    assert third.lso_stalls_opened == (stall,) and stall.started_ms == 0 and stall.blocking_producer_id == 7
    assert last.lso_stalls_opened == () and last.lso_stalls[0].max_gap == 40
    (hung,) = last.hanging
    assert hung.reason is HangingReason.PARTITION_NOT_LISTED and hung.incident_key == "c/orders-0/7"
    (overdue,) = last.overdue
    assert overdue.transactional_id == "app-1"
    # Past the grace period every check fails, but the failure is sampled once.
    assert [s.failed for s in second.verification.samples] == [True] and third.verification.samples == ()
    assert (second.verification.failures, third.verification.failures) == (1, 1)
    assert [(row.lag_lso, row.lag_hwm) for row in last.lags] == [(0, 40)]
    assert len(third.lso_stalls_opened) == 1 and not last.lso_stalls_opened


def test_replaying_the_same_snapshots_gives_the_same_findings() -> None:
    assert _run(_polls()) == _run(_polls())


def test_evaluate_does_not_touch_the_previous_state() -> None:
    state, _ = evaluate(INITIAL, _polls()[0], 0, S)
    frozen = (dict(state.transactions), dict(state.lso), dict(state.verification))
    evaluate(state, _polls()[2], 31_000, S)
    assert (dict(state.transactions), dict(state.lso), dict(state.verification)) == frozen
    assert INITIAL.transactions == {}


def test_stuck_prepare_is_reported_through_evaluate() -> None:
    prep = snapshot(txns=(txn(state=TxnState.PREPARE_COMMIT),))
    state, f1 = evaluate(INITIAL, prep, 0, S)
    state, f2 = evaluate(state, replace(prep, taken_at_ms=31_000), 31_000, S)
    assert f1.stuck_prepare == () and [s.duration_ms for s in f2.stuck_prepare] == [31_000]


def test_event_counts_of_nothing_is_empty() -> None:
    assert event_counts(None) == {}


def test_lso_tracks_survive_a_poll_without_partitions() -> None:
    tracks, _, _ = lso_detect.update_lso({}, _polls()[0], 0, S)
    kept, active, ended = lso_detect.update_lso(tracks, snapshot(at=5_000), 5_000, S)
    assert kept == tracks and active == [] and ended == []


def test_hanging_incident_stays_undetermined_while_its_leader_is_silent() -> None:
    polls = _polls()
    state = INITIAL
    for snap in polls:
        state, findings = evaluate(state, snap, snap.taken_at_ms, S)
    assert [h.incident_key for h in findings.hanging] == ["c/orders-0/7"]
    silent = replace(polls[-1], partitions={TP: partition(hwm=None, lso=None, producers=None)})
    _, blind = evaluate(state, silent, MAX_TIMEOUT + 15_000, S)
    assert blind.hanging == () and [(u.tp, u.producer_id) for u in blind.undetermined] == [(TP, 7)]
    assert [s.incident_key for s in blind.lso_stalls] == ["c/orders-0"]


def test_settings_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="lso_stall_ms"):
        DetectionSettings(lso_stall_ms=-1)
    with pytest.raises(ValueError, match="lso_history"):
        DetectionSettings(lso_history=1)
