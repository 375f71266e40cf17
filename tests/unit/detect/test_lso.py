"""LSO stall episodes across polls."""

from __future__ import annotations

from tests.unit.detect.builders import TP1, partition, producer, snapshot, txn
from txnwatch.detect import lso
from txnwatch.detect.settings import DetectionSettings

S = DetectionSettings(lso_stall_ms=30_000, verification_grace_ms=10_000)


def run_lso(*polls: tuple[int, int | None, int | None]) -> tuple[list, list]:
    tracks: dict = {}
    active: list = []
    ended_all: list = []
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
    blocker = (episode.blocking_producer_id, episode.blocking_producer_epoch, episode.blocking_transactional_id)
    assert blocker == (9, 3, "blocker")
    active, ended = run_lso((0, 10, 20), (31_000, 10, 45), (40_000, 10, 40), (50_000, 46, 46))
    assert active == [] and len(ended) == 1 and ended[0].ended_ms == 50_000 and ended[0].max_gap == 35


def test_unknown_offsets_neither_open_nor_close() -> None:
    active, ended = run_lso((0, 10, 20), (31_000, 10, 30), (40_000, None, None))
    assert len(active) == 1 and ended == []


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
