"""find-hanging semantics (Kafka's TransactionsCommand), overdue and stuck Prepare*."""

from __future__ import annotations

from tests.unit.detect.builders import MAX_TIMEOUT, TP, TP1, partition, producer, snapshot, txn
from txnwatch.core.model import HangingReason, ListedTransaction, RequestError, TxnState
from txnwatch.detect import hanging
from txnwatch.detect.settings import DetectionSettings

S = DetectionSettings()
OLD = MAX_TIMEOUT + 1  # "now" such that a write at t=0 is older than the max timeout


def test_open_txn_unknown_to_every_coordinator_hangs() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(),)),))
    found, undetermined = hanging.find_hanging(snap, OLD, S)
    assert [(h.tp, h.producer_id, h.reason, h.transactional_id) for h in found] == [
        (TP, 7, HangingReason.NO_TRANSACTIONAL_ID, None)]
    assert found[0].incident_key == "c/orders-0/7" and found[0].age_ms == OLD and not undetermined


def test_under_an_id_pattern_an_unlisted_producer_is_undetermined_not_hanging() -> None:
    """With transactional_id_pattern the listing names only the tenant's ids: another tenant's open
    transaction on a watched partition would otherwise be "no transactional id" and page."""
    snap = snapshot(partitions=(partition(producers=(producer(),)),), pattern="team-a-.*")
    found, undetermined = hanging.find_hanging(snap, OLD, S)
    assert found == []
    assert [(u.tp, u.producer_id) for u in undetermined] == [(TP, 7)]
    assert "team-a-.*" in undetermined[0].why


def test_under_an_id_pattern_a_listed_id_is_judged_as_always() -> None:
    listed = (ListedTransaction("team-a-1", 7, TxnState.ONGOING, 1),)
    snap = snapshot(partitions=(partition(producers=(producer(),)),), txns=(txn("team-a-1", partitions=()),),
                    listed=listed, pattern="team-a-.*")
    found, _ = hanging.find_hanging(snap, OLD, S)
    assert [h.reason for h in found] == [HangingReason.PARTITION_NOT_LISTED]


def test_young_open_txn_is_not_a_candidate() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(),)),))
    assert hanging.find_hanging(snap, MAX_TIMEOUT, S) == ([], [])


def test_margin_delays_candidates() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(),)),))
    assert hanging.find_hanging(snap, OLD, DetectionSettings(hanging_margin_ms=60_000)) == ([], [])


def test_coordinator_listing_the_partition_is_not_hanging_however_old() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(),)),), txns=(txn(partitions=(TP,)),))
    assert hanging.find_hanging(snap, OLD * 10, S) == ([], [])


def test_coordinator_not_listing_the_partition_hangs() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(),)),), txns=(txn(partitions=(TP1,)),))
    (found,), _ = hanging.find_hanging(snap, OLD, S)
    assert found.reason is HangingReason.PARTITION_NOT_LISTED and found.transactional_id == "app-1"
    assert found.coordinator_id == 1


def test_id_the_coordinator_answers_not_found_for_hangs() -> None:
    listed = (ListedTransaction("app-1", 7, TxnState.ONGOING, 1),)
    not_found = (RequestError("DescribeTransactions", "app-1", 105, "TRANSACTIONAL_ID_NOT_FOUND"),)
    snap = snapshot(partitions=(partition(producers=(producer(),)),), listed=listed, errors=not_found)
    (found,), _ = hanging.find_hanging(snap, OLD, S)
    assert found.reason is HangingReason.UNKNOWN_TO_COORDINATOR and found.transactional_id == "app-1"


def test_listed_but_silently_undescribed_id_is_undetermined() -> None:
    listed = (ListedTransaction("app-1", 7, TxnState.ONGOING, 1),)
    snap = snapshot(partitions=(partition(producers=(producer(),)),), listed=listed)
    found, (undetermined,) = hanging.find_hanging(snap, OLD, S)
    assert found == [] and undetermined.transactional_id == "app-1" and undetermined.coordinator_id == 1


def test_id_now_held_by_another_producer_id_hangs() -> None:
    listed = (ListedTransaction("app-1", 7, TxnState.ONGOING, 1),)
    snap = snapshot(partitions=(partition(producers=(producer(pid=7),)),), listed=listed,
                    txns=(txn(pid=8, partitions=(TP,)),))
    (found,), _ = hanging.find_hanging(snap, OLD, S)
    assert found.reason is HangingReason.PRODUCER_ID_MISMATCH


def test_epoch_difference_alone_is_not_hanging() -> None:
    """Transaction version 2 bumps the epoch at every transaction end; Kafka's tool ignores epochs too."""
    snap = snapshot(partitions=(partition(producers=(producer(epoch=3),)),), txns=(txn(epoch=4, partitions=(TP,)),))
    assert hanging.find_hanging(snap, OLD, S) == ([], [])


def test_age_is_strictly_greater_than_the_threshold_like_kafka() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(last_ms=5),)),))
    assert hanging.find_hanging(snap, MAX_TIMEOUT + 5, S) == ([], [])
    (found,), _ = hanging.find_hanging(snap, MAX_TIMEOUT + 6, S)
    assert (found.txn_start_offset, found.last_timestamp_ms, found.age_ms) == (10, 5, MAX_TIMEOUT + 1)


def test_producers_without_open_txn_or_timestamp_are_not_candidates() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(start=None), producer(pid=8, last_ms=None))),))
    assert hanging.find_hanging(snap, OLD * 10, S) == ([], [])


def test_unreachable_coordinator_is_undetermined_not_hanging() -> None:
    listed = (ListedTransaction("app-1", 7, TxnState.ONGOING, 1),)
    snap = snapshot(partitions=(partition(producers=(producer(),)),), listed=listed, unreachable=frozenset({1}))
    found, undetermined = hanging.find_hanging(snap, OLD, S)
    assert found == [] and [u.producer_id for u in undetermined] == [7]
    errors = (RequestError("DescribeTransactions", "app-1", 15, "COORDINATOR_NOT_AVAILABLE"),)
    snap = snapshot(partitions=(partition(producers=(producer(),)),), listed=listed, errors=errors)
    assert hanging.find_hanging(snap, OLD, S)[0] == []


def test_incomplete_listing_is_undetermined() -> None:
    snap = snapshot(partitions=(partition(producers=(producer(),)),), complete=False)
    found, undetermined = hanging.find_hanging(snap, OLD, S)
    assert found == [] and len(undetermined) == 1


def test_unknown_producers_are_undetermined_not_evidence() -> None:
    snap = snapshot(partitions=(partition(producers=None),))
    found, (undetermined,) = hanging.find_hanging(snap, OLD, S)
    assert found == [] and undetermined.producer_id is None and undetermined.tp == TP


def test_overdue_ongoing_past_own_timeout_plus_grace() -> None:
    snap = snapshot(txns=(txn(start=0, timeout=10_000),))
    assert hanging.find_overdue(snap, 10_000 + S.timeout_grace_ms, S) == []
    (late,) = hanging.find_overdue(snap, 10_001 + S.timeout_grace_ms, S)
    assert late.transactional_id == "app-1" and late.age_ms == 10_001 + S.timeout_grace_ms


def test_prepare_commit_for_milliseconds_is_normal_but_stuck_when_long() -> None:
    snap = snapshot(txns=(txn(state=TxnState.PREPARE_COMMIT),))
    since = hanging.track_prepare({}, snap, 1_000)
    assert hanging.find_stuck_prepare(since, snap, 1_050, S) == []
    since = hanging.track_prepare(since, snap, 1_000 + S.prepare_stuck_ms + 1)
    (stuck,) = hanging.find_stuck_prepare(since, snap, 1_000 + S.prepare_stuck_ms + 1, S)
    assert stuck.since_ms == 1_000 and stuck.state is TxnState.PREPARE_COMMIT
    moved_on = snapshot(txns=(txn(state=TxnState.COMPLETE_COMMIT),))
    assert hanging.track_prepare(since, moved_on, 99_999) == {}


def test_prepare_clock_survives_a_coordinator_that_stopped_answering() -> None:
    snap = snapshot(txns=(txn(state=TxnState.PREPARE_ABORT),))
    since = hanging.track_prepare({}, snap, 0)
    listed_only = snapshot(listed=(ListedTransaction("app-1", 7, TxnState.PREPARE_ABORT, 1),),
                           unreachable=frozenset({1}))
    since = hanging.track_prepare(since, listed_only, 40_000)
    (stuck,) = hanging.find_stuck_prepare(since, listed_only, 40_000, S)
    assert stuck.since_ms == 0 and stuck.state is TxnState.PREPARE_ABORT
    assert hanging.track_prepare(since, snapshot(), 50_000) == {}  # gone from a complete listing


def test_only_ongoing_transactions_can_be_overdue() -> None:
    """The coordinator aborts timed-out Ongoing transactions only; Prepare* has its own finding."""
    snap = snapshot(txns=(txn(state=TxnState.PREPARE_COMMIT, start=0, timeout=10_000),
                          txn("b", pid=8, start=None)))
    assert hanging.find_overdue(snap, 10**9, S) == []


def test_silent_leader_names_the_producers_last_seen_open_there() -> None:
    snap = snapshot(partitions=(partition(producers=None),))
    found, undetermined = hanging.find_hanging(snap, OLD, S, {TP: frozenset({7, 9})})
    assert found == [] and sorted(u.producer_id or 0 for u in undetermined) == [7, 9]
