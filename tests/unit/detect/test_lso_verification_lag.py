"""LSO stall episodes, verification-style checks and read_committed lag."""

from __future__ import annotations

from txnwatch.detect import lag, lso, verification
from txnwatch.detect.settings import DetectionSettings
from txnwatch.model import GroupSnapshot, TopicPartition, TxnState

from tests.unit.detect.builders import TP, TP1, partition, producer, snapshot, txn

S = DetectionSettings(lso_stall_ms=30_000, verification_grace_ms=10_000)


def run_lso(*polls: tuple[int, int | None, int | None]) -> tuple[list, list]:  # type: ignore[type-arg]
    tracks: dict = {}  # type: ignore[type-arg]
    active: list = []  # type: ignore[type-arg]
    ended_all: list = []  # type: ignore[type-arg]
    for at, lso_value, hwm in polls:
        blocker = producer(pid=9, epoch=3, start=lso_value, last_ms=at) if lso_value is not None else None
        snap = snapshot(partitions=(partition(hwm=hwm, lso=lso_value, producers=(blocker,) if blocker else ()),),
                        txns=(txn(txn_id="blocker", pid=9, epoch=3),), at=at)
        tracks, active, ended = lso.update_lso(tracks, snap, at, S)
        ended_all.extend(ended)
    return active, ended_all


def test_short_open_transaction_is_no_stall() -> None:
    assert run_lso((0, 10, 20), (10_000, 10, 25), (20_000, 25, 25)) == ([], [])


def test_stall_opens_after_threshold_with_blocker_and_closes_when_lso_moves() -> None:
    active, ended = run_lso((0, 10, 20), (15_000, 10, 30), (31_000, 10, 45))
    (episode,) = active
    assert episode.started_ms == 0 and episode.stalled_lso == 10 and episode.max_gap == 35
    assert (episode.blocking_producer_id, episode.blocking_producer_epoch, episode.blocking_transactional_id) == (9, 3, "blocker")
    active, ended = run_lso((0, 10, 20), (31_000, 10, 45), (40_000, 10, 40), (50_000, 46, 46))
    assert active == [] and len(ended) == 1 and ended[0].ended_ms == 50_000 and ended[0].max_gap == 35


def test_unknown_offsets_neither_open_nor_close() -> None:
    active, ended = run_lso((0, 10, 20), (31_000, 10, 30), (40_000, None, None))
    assert len(active) == 1 and ended == []


def test_verification_time_and_failures() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    pending, first = verification.check({}, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP1,)),), at=0), 0, S)
    assert (first.checks, first.failures, first.samples) == (1, 0, ())
    pending, later = verification.check(pending, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP,)),)), 4_000, S)
    (sample,) = later.samples
    assert sample.verification_ms == 4_000 and not sample.failed and sample.transactional_id == "app-1"
    pending, again = verification.check(pending, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP,)),)), 8_000, S)
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


def test_lag_against_lso_and_hwm_while_a_transaction_is_open() -> None:
    part = partition(hwm=120, lso=100, producers=(producer(start=100),))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 90})
    (row,) = lag.group_lags(snapshot(partitions=(part,), groups=(group,)), {}, 0)
    assert (row.lag_hwm, row.lag_lso) == (30, 10)


def test_trailing_commit_marker_is_not_lag() -> None:
    committed_by_txn = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=2),))
    plain = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=-1),))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 100})
    (marker,) = lag.group_lags(snapshot(partitions=(committed_by_txn,), groups=(group,)), {}, 0)
    (real,) = lag.group_lags(snapshot(partitions=(plain,), groups=(group,)), {}, 0)
    assert (marker.lag_hwm, marker.lag_lso, marker.lag_seconds) == (0, 0, 0.0)
    assert (real.lag_hwm, real.lag_lso) == (1, 1)


def test_time_lag_from_lso_history() -> None:
    history = ((0, 10), (5_000, 20), (10_000, 30))
    assert lag.time_lag_seconds(history, 15, 12_000) == 7.0
    assert lag.time_lag_seconds(history, 30, 12_000) == 0.0
    assert lag.time_lag_seconds(history, 5, 12_000) is None
    tp = TopicPartition("t", 0)
    h = lag.update_history({}, snapshot(partitions=(partition(tp=tp, lso=1),)), 0, keep=2)
    h = lag.update_history(h, snapshot(partitions=(partition(tp=tp, lso=1),)), 1, keep=2)
    h = lag.update_history(h, snapshot(partitions=(partition(tp=tp, lso=2),)), 2, keep=2)
    h = lag.update_history(h, snapshot(partitions=(partition(tp=tp, lso=3),)), 3, keep=2)
    assert h[tp] == ((2, 2), (3, 3))


def test_idle_partition_that_opens_a_transaction_starts_a_fresh_clock() -> None:
    """An LSO that sat at the high watermark for an hour is not stalled the moment a transaction opens."""
    active, _ = run_lso((0, 10, 10), (3_600_000, 10, 10), (3_615_000, 10, 20))
    assert active == []
    active, _ = run_lso((0, 10, 10), (3_600_000, 10, 10), (3_615_000, 10, 20), (3_646_000, 10, 30))
    assert [e.started_ms for e in active] == [3_615_000]


def test_episode_ends_when_its_partition_is_no_longer_polled() -> None:
    active, _ = run_lso((0, 10, 20), (31_000, 10, 30))
    tracks, _, _ = lso.update_lso({}, snapshot(partitions=(partition(hwm=20, lso=10),), at=0), 0, S)
    tracks, (episode,), _ = lso.update_lso(tracks, snapshot(partitions=(partition(hwm=30, lso=10),)), 31_000, S)
    other = snapshot(partitions=(partition(tp=TP1, hwm=5, lso=5),))
    _, active, (ended,) = lso.update_lso(tracks, other, 40_000, S)
    assert active == [] and ended.tp == episode.tp and ended.ended_ms == 40_000


def test_lag_ignores_groups_without_a_committed_offset_and_unwatched_partitions() -> None:
    part = partition(hwm=120, lso=100)
    group = GroupSnapshot("g", "Stable", "consumer", {TP: -1, TP1: 5})
    assert lag.group_lags(snapshot(partitions=(part,), groups=(group,)), {}, 0) == []


def test_residual_of_one_is_lag_while_a_transaction_is_open() -> None:
    part = partition(hwm=101, lso=101, producers=(producer(start=None, coordinator_epoch=2, last_ms=5),
                                                   producer(pid=8, start=90, coordinator_epoch=1, last_ms=1)))
    group = GroupSnapshot("g", "Stable", "consumer", {TP: 100})
    (row,) = lag.group_lags(snapshot(partitions=(part,), groups=(group,)), {}, 0)
    assert row.lag_lso == 1


def test_verification_keeps_clocks_of_partitions_it_could_not_ask() -> None:
    open_p = partition(producers=(producer(pid=7, start=10),))
    pending, _ = verification.check({}, snapshot(partitions=(open_p,), txns=(txn(partitions=(TP1,)),)), 0, S)
    pending, blind = verification.check(pending, snapshot(partitions=(partition(producers=None),)), 5_000, S)
    assert blind.checks == 0 and list(pending.values())[0].first_seen_ms == 0
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
