"""A new leadership term resumes the incidents the store holds open instead of reopening them."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.lanes import examples
from tests.unit.detect.builders import TP, partition, producer, snapshot, txn
from txnwatch import detect
from txnwatch.core.findings import LsoStall
from txnwatch.core.model import ClusterSnapshot, TransactionDescription, TxnState
from txnwatch.detect.settings import DetectionSettings

S = DetectionSettings(lso_stall_ms=30_000, prepare_stuck_ms=30_000)


def stalled_at(at: int, lso: int = 10, hwm: int = 40) -> ClusterSnapshot:
    blocker = producer(pid=9, epoch=3, start=lso, last_ms=0)
    return snapshot(partitions=(partition(hwm=hwm, lso=lso, producers=(blocker,)),),
                    txns=(txn(txn_id="blocker", pid=9, epoch=3),), at=at)


EPISODE = LsoStall("c", TP, started_ms=0, last_seen_ms=60_000, stalled_lso=10, max_gap=25, gap=25,
                   blocking_producer_id=9, blocking_producer_epoch=3, blocking_transactional_id="blocker")


def test_open_stall_continues_with_its_start_and_is_not_opened_again() -> None:
    _, findings = detect.evaluate(detect.resumed([EPISODE], {}, {}), stalled_at(61_000), 61_000, S)
    (stall,) = findings.lso_stalls
    assert (stall.started_ms, stall.max_gap, stall.last_seen_ms) == (0, 30, 61_000)
    assert findings.lso_stalls_opened == () and findings.lso_stalls_ended == ()


def test_without_resuming_the_same_poll_would_end_the_incident() -> None:
    _, findings = detect.evaluate(detect.INITIAL, stalled_at(61_000), 61_000, S)
    assert findings.lso_stalls == ()


def test_open_stall_whose_lso_moved_meanwhile_ends_at_the_first_poll() -> None:
    _, findings = detect.evaluate(detect.resumed([EPISODE], {}, {}), stalled_at(61_000, lso=40, hwm=40), 61_000, S)
    (ended,) = findings.lso_stalls_ended
    assert findings.lso_stalls == () and (ended.started_ms, ended.ended_ms) == (0, 61_000)


def test_prepare_clock_carries_on_for_the_same_transaction_only() -> None:
    snap = snapshot(txns=(txn(state=TxnState.PREPARE_COMMIT, pid=7, epoch=2, start=500),), at=45_000)
    since = {"app-1": ((TxnState.PREPARE_COMMIT, 7, 2, 500), 1_000)}
    _, findings = detect.evaluate(detect.resumed([], since, {}), snap, 45_000, S)
    (stuck,) = findings.stuck_prepare
    assert stuck.since_ms == 1_000
    other_epoch = {"app-1": ((TxnState.PREPARE_COMMIT, 7, 1, 500), 1_000)}  # an earlier transaction's commit
    _, findings = detect.evaluate(detect.resumed([], other_epoch, {}), snap, 45_000, S)
    assert findings.stuck_prepare == ()


# (LSO step, HWM step) per poll; a still LSO is common, so that stalls open before most restarts.
polls = st.lists(st.tuples(st.sampled_from([0, 0, 0, 1, 3]), st.integers(0, 5)), min_size=2, max_size=25)


@settings(max_examples=examples(200), deadline=None)
@given(polls, st.data())
def test_a_restart_at_any_poll_keeps_every_open_episode(steps: list[tuple[int, int]], data: st.DataObject) -> None:
    """Replaying with a restart (state rebuilt from the open episodes, as the store has them) changes no episode
    that was open at the restart: same start, still open in the same polls, ended in the same poll."""
    restart = data.draw(st.integers(0, len(steps) - 1))
    lso = hwm = 0
    snaps = []
    for i, (lso_step, hwm_step) in enumerate(steps):
        hwm += hwm_step
        lso = min(hwm, lso + (lso_step if lso_step < 3 else hwm))  # 3: a commit lets the LSO catch up
        snaps.append((i * 20_000, stalled_at(i * 20_000, lso=lso, hwm=hwm)))
    state, resumed_state = detect.INITIAL, None
    open_at_restart: set[int] = set()
    for i, (at, snap) in enumerate(snaps):
        state, findings = detect.evaluate(state, snap, at, S)
        if resumed_state is not None:
            resumed_state, again = detect.evaluate(resumed_state, snap, at, S)
            kept = [replace(s, last_seen_ms=0) for s in findings.lso_stalls if s.started_ms in open_at_restart]
            assert [replace(s, last_seen_ms=0) for s in again.lso_stalls if s.started_ms in open_at_restart] == kept
            assert ([s.started_ms for s in again.lso_stalls_ended if s.started_ms in open_at_restart]
                    == [s.started_ms for s in findings.lso_stalls_ended if s.started_ms in open_at_restart])
        if i == restart:
            open_at_restart = {s.started_ms for s in findings.lso_stalls}
            resumed_state = detect.resumed(findings.lso_stalls, state.prepare_since, {})


def open_on_partition(at: int, *, last_write: int, coordinator: tuple[TransactionDescription, ...] = ()) -> ClusterSnapshot:
    """Producer 7 holds a transaction open on TP, last written at ``last_write``."""
    return snapshot(partitions=(partition(hwm=40, lso=10, producers=(producer(pid=7, start=10, last_ms=last_write),)),),
                    txns=coordinator, at=at)


def test_first_poll_of_a_term_counts_an_unlisted_old_write_as_a_verification_failure() -> None:
    snap = open_on_partition(100_000, last_write=40_000)  # the coordinator does not know producer 7
    _, fresh = detect.evaluate(detect.INITIAL, snap, 100_000, S)
    _, again = detect.evaluate(detect.resumed([], {}, {}), snap, 100_000, S)
    assert (fresh.verification.checks, fresh.verification.failures) == (1, 0)  # a first sighting gets its grace
    assert (again.verification.checks, again.verification.failures) == (1, 1)
    assert [s.failed for s in again.verification.samples] == [True]


def test_an_ending_transaction_keeps_its_grace_after_a_resume() -> None:
    committing = txn(txn_id="app-1", pid=7, state=TxnState.COMPLETE_COMMIT, partitions=())
    snap = open_on_partition(100_000, last_write=40_000, coordinator=(committing,))
    _, findings = detect.evaluate(detect.resumed([], {}, {}), snap, 100_000, S)
    assert (findings.verification.checks, findings.verification.failures) == (1, 0)


def test_only_the_first_poll_of_a_term_judges_by_the_last_write() -> None:
    state, _ = detect.evaluate(detect.resumed([], {}, {}), snapshot(at=100_000), 100_000, S)
    assert not state.resumed
    _, findings = detect.evaluate(state, open_on_partition(115_000, last_write=40_000), 115_000, S)
    assert findings.verification.failures == 0


def test_a_hanging_incident_stays_undecided_when_its_partition_cannot_be_asked_after_a_resume() -> None:
    silent = snapshot(partitions=(partition(hwm=40, lso=10, producers=None),), at=100_000)  # DescribeProducers failed
    _, fresh = detect.evaluate(detect.INITIAL, silent, 100_000, S)
    _, again = detect.evaluate(detect.resumed([], {}, {(TP, 7, 10): 20_000}), silent, 100_000, S)
    assert [(u.tp, u.producer_id) for u in fresh.undetermined] == [(TP, None)]  # matches no incident: it resolves
    assert [(u.tp, u.producer_id) for u in again.undetermined] == [(TP, 7)]  # the incident's key: kept open


def test_carried_over_failures_count_without_a_second_failed_sample() -> None:
    snap = open_on_partition(100_000, last_write=20_000)
    _, findings = detect.evaluate(detect.resumed([], {}, {(TP, 7, 10): 30_000}), snap, 100_000, S)
    assert (findings.verification.failures, findings.verification.samples) == (1, ())
