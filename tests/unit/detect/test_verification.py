"""KIP-890-style verification time and failures, measured from outside."""

from __future__ import annotations

from tests.unit.detect.builders import TP, TP1, partition, producer, snapshot, txn
from txnwatch.core.model import TxnState
from txnwatch.detect import verification
from txnwatch.detect.settings import DetectionSettings

S = DetectionSettings(lso_stall_ms=30_000, verification_grace_ms=10_000)


def test_verification_time_and_failures() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    elsewhere = snapshot(partitions=(open_p,), txns=(txn(partitions=(TP1,)),))
    listed = snapshot(partitions=(open_p,), txns=(txn(partitions=(TP,)),))
    pending, first = verification.check({}, elsewhere, 0, S)
    assert (first.checks, first.failures, first.samples) == (1, 0, ())
    pending, later = verification.check(pending, listed, 4_000, S)
    (sample,) = later.samples
    assert sample.verification_ms == 4_000 and not sample.failed and sample.transactional_id == "app-1"
    pending, again = verification.check(pending, listed, 8_000, S)
    assert again.samples == () and again.checks == 1


def test_verification_failure_after_grace_sampled_once() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    snap = snapshot(partitions=(open_p,))  # no coordinator knows producer 7
    pending, c1 = verification.check({}, snap, 0, S)
    pending, c2 = verification.check(pending, snap, 11_000, S)
    pending, c3 = verification.check(pending, snap, 22_000, S)
    assert (c1.failures, c2.failures, c3.failures) == (0, 1, 1)
    assert [s.failed for s in c2.samples] == [True] and c3.samples == ()


def test_verification_skips_unanswered_coordinators() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    _, c = verification.check({}, snapshot(partitions=(open_p,), complete=False), 50_000, S)
    assert c.checks == 0 and c.failures == 0


def test_verification_keeps_clocks_of_partitions_it_could_not_ask() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    pending, _ = verification.check({}, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP1,)),)), 0, S)
    pending, blind = verification.check(pending, snapshot(partitions=(partition(producers=None),)), 5_000, S)
    assert blind.checks == 0 and next(iter(pending.values())).first_seen_ms == 0
    _, seen = verification.check(pending, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP,)),)), 9_000, S)
    assert [s.verification_ms for s in seen.samples] == [9_000]


def test_long_verified_transaction_that_just_completed_is_no_failure() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    pending, _ = verification.check({}, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP,)),)), 0, S)
    pending, _ = verification.check(pending, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP,)),)), 60_000, S)
    done = snapshot(partitions=(open_p,), txns=(txn(state=TxnState.COMPLETE_COMMIT, partitions=()),))
    pending, racing = verification.check(pending, done, 65_000, S)
    assert racing.failures == 0 and racing.checks == 1
    _, stuck = verification.check(pending, done, 71_000, S)
    assert stuck.failures == 1
