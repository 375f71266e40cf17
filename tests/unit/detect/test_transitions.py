"""Coordinator history: transitions and the events they imply."""

from __future__ import annotations

from tests.unit.detect.builders import snapshot, txn
from txnwatch.core.model import ListedTransaction, TxnState
from txnwatch.detect import transitions

# One letter per state keeps the transition tables readable.
O, PC, PA, CC, CA, E = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,  # noqa: E741
                        TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.EMPTY)


def events(prev, cur, now=1_000):
    return transitions.derive_events(prev, cur, now)


def test_commit_and_abort() -> None:
    assert events(txn(state=O), txn(state=CC)) == ("commit",)
    assert events(txn(state=O), txn(state=CA)) == ("abort",)
    assert "commit" in events(txn(state=CC, start=0), txn(state=CC, start=500))


def test_coordinator_timeout_abort_bumps_epoch() -> None:
    assert events(txn(state=O, epoch=1, start=0, timeout=10_000), txn(state=CA, epoch=2, start=0), now=11_000) == (
        "abort", "epoch_bump", "timeout_abort")


def test_fencing_by_a_new_instance() -> None:
    assert events(txn(state=O, epoch=1), txn(state=E, epoch=3, start=None)) == ("epoch_bump", "fenced")
    assert events(txn(state=O, epoch=1), txn(state=TxnState.PREPARE_EPOCH_FENCE, epoch=2)) == (
        "epoch_bump", "fenced")


def test_init_after_a_finished_transaction_is_not_fencing() -> None:
    assert events(txn(state=CC, epoch=1), txn(state=E, epoch=2, start=None)) == ("epoch_bump", "init_producer_id")


def test_ongoing_at_higher_epoch_is_finished_transactions_and_a_new_one() -> None:
    """Transaction version 2 bumps the epoch at every end: k bumps between polls are k transactions."""
    assert events(txn(state=O, epoch=1, start=0), txn(state=O, epoch=4, start=900)) == (
        "completed_between_polls", "epoch_bump")
    assert events(txn(state=O, epoch=1, start=0), txn(state=O, epoch=1, start=900)) == (
        "completed_between_polls",)


def test_prepare_counts_as_the_outcome_once() -> None:
    assert events(txn(state=O), txn(state=PC)) == ("commit",)
    assert events(txn(state=PC), txn(state=CC)) == ()
    assert events(txn(state=PA), txn(state=CA)) == ()
    assert events(txn(state=O), txn(state=PA)) == ("abort",)


def test_late_client_abort_is_not_a_timeout_abort_unless_the_timeout_elapsed() -> None:
    assert events(txn(state=O, epoch=1, start=0, timeout=10_000), txn(state=CA, epoch=2, start=0), now=5_000) == (
        "abort", "epoch_bump")


def test_transaction_v2_bump_with_commit_is_not_fencing() -> None:
    assert events(txn(state=O, epoch=1), txn(state=CC, epoch=2)) == ("commit", "epoch_bump")


def test_producer_id_change_kip360() -> None:
    assert events(txn(pid=7, state=E), txn(pid=8, state=E)) == ("producer_id_change",)


def test_committing_to_aborting_is_illegal() -> None:
    assert "illegal_transition" in events(txn(state=PC, start=5), txn(state=PA, start=5))
    assert "illegal_transition" not in events(txn(state=PC, start=5), txn(state=PA, start=9))
    assert "illegal_transition" in events(txn(state=CC, start=5), txn(state=O, start=5))
    assert "illegal_transition" not in events(txn(state=CC, start=5), txn(state=O, start=6))


def test_a_fence_of_a_transaction_that_already_decided_is_illegal() -> None:
    """PrepareEpochFence only follows Ongoing (Kafka's validPreviousStates), and the fence only aborts."""
    F = TxnState.PREPARE_EPOCH_FENCE
    assert "illegal_transition" in events(txn(state=PC, start=5), txn(state=F, start=5, epoch=1))
    assert "illegal_transition" in events(txn(state=CA, start=5), txn(state=F, start=5, epoch=1))
    assert "illegal_transition" in events(txn(state=F, start=5), txn(state=CC, start=5))
    assert "illegal_transition" not in events(txn(state=O, start=5), txn(state=F, start=5, epoch=1))
    assert "illegal_transition" not in events(txn(state=F, start=5), txn(state=CA, start=5))


def test_diff_reports_changes_expiry_and_keeps_unasked_ids() -> None:
    first, t1 = transitions.diff({}, snapshot(txns=(txn("a"), txn("b"))), 0)
    assert sorted((t.transactional_id, t.events) for t in t1) == [("a", ("new",)), ("b", ("new",))]
    same, t2 = transitions.diff(first, snapshot(txns=(txn("a"), txn("b"))), 1)
    assert t2 == []
    # b is gone from a complete listing: expired; a committed.
    after, t3 = transitions.diff(same, snapshot(txns=(txn("a", state=CC),)), 2)
    assert sorted((t.transactional_id, t.to_state, t.events) for t in t3) == [
        ("a", CC, ("commit",)), ("b", TxnState.DEAD, ("expired",))]
    # coordinator of "a" did not answer: nothing is concluded about it
    listed = (ListedTransaction("a", 7, CC, 1),)
    kept, t4 = transitions.diff(after, snapshot(listed=listed, unreachable=frozenset({1})), 3)
    assert t4 == [] and "a" in kept


def test_transition_rows_carry_before_and_after() -> None:
    first, _ = transitions.diff({}, snapshot(txns=(txn(pid=7, epoch=3, state=O, start=100),)), 0)
    _, (row,) = transitions.diff(first, snapshot(txns=(txn(pid=7, epoch=4, state=CC, start=100),)), 5_000)
    assert (row.from_state, row.to_state, row.prev_producer_epoch, row.producer_epoch) == (O, CC, 3, 4)
    assert row.duration_ms == 4_900 and row.events == ("commit", "epoch_bump")
    assert all(type(e) is str for e in row.events)


def test_new_producer_id_for_the_same_id_is_reported_once_per_change() -> None:
    first, _ = transitions.diff({}, snapshot(txns=(txn(pid=7, epoch=32766, state=CC),)), 0)
    after, (row,) = transitions.diff(first, snapshot(txns=(txn(pid=8, epoch=0, state=E, start=None),)), 1)
    assert row.events == ("producer_id_change",) and (row.prev_producer_id, row.producer_id) == (7, 8)
    assert transitions.diff(after, snapshot(txns=(txn(pid=8, epoch=0, state=E, start=None),)), 2)[1] == []
