"""LSO-stall episodes, one numbered row per transition of detect/lso.update_lso.

Each row is one poll of one partition (orders-0, unless the row says otherwise): the track kept from the
poll before, what the poll saw, the moment, and what must come out: the track kept for the next poll,
the episode active now, the episode that ended in this poll.  ``lso_stall_ms`` is 30 s.  The blocker
is producer 9 (epoch 3, transactional id "blocker") when a row puts it at the LSO.  The same style as
tests/alerting/test_evaluator_table.py: comment each row with why, and explain a changed row in its commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import pytest

from tests.unit.detect.builders import TP, TP1, partition, producer, snapshot, txn
from txnwatch.core.findings import LsoStall
from txnwatch.core.model import PartitionSnapshot
from txnwatch.detect.lso import LsoTrack, update_lso
from txnwatch.detect.settings import DetectionSettings

S = DetectionSettings(lso_stall_ms=30_000)


class E(NamedTuple):
    """An episode as the row states it."""

    started: int
    seen: int
    lso: int
    gap: int
    max_gap: int
    blocker: tuple[int | None, int | None, str | None] = (9, 3, "blocker")
    ended: int | None = None


def episode(e: E) -> LsoStall:
    pid, epoch, txn_id = e.blocker
    return LsoStall("c", TP, started_ms=e.started, last_seen_ms=e.seen, stalled_lso=e.lso, max_gap=e.max_gap,
                    gap=e.gap, blocking_producer_id=pid, blocking_producer_epoch=epoch, blocking_transactional_id=txn_id,
                    ended_ms=e.ended)


def read(stall: LsoStall) -> E:
    return E(stall.started_ms, stall.last_seen_ms, stall.stalled_lso, stall.gap, stall.max_gap,
             (stall.blocking_producer_id, stall.blocking_producer_epoch, stall.blocking_transactional_id), stall.ended_ms)


def track(lso: int, since: int, e: E | None = None, caught_up: bool = False) -> LsoTrack:
    return LsoTrack(lso=lso, since_ms=since, episode=None if e is None else episode(e), caught_up=caught_up)


def seen(lso: int | None, hwm: int | None, blocker_epoch: int | None = 3) -> PartitionSnapshot:
    """The partition as a poll saw it; ``blocker_epoch=None``: no producer has its transaction at the LSO."""
    blocker = () if blocker_epoch is None or lso is None else (producer(pid=9, epoch=blocker_epoch, start=lso),)
    return partition(hwm=hwm, lso=lso, producers=blocker)


@dataclass(frozen=True)
class Case:
    before: LsoTrack | None
    poll: tuple[PartitionSnapshot, ...]
    now: int
    after: LsoTrack | None  # the track kept for orders-0 (None: none)
    active: E | None = None
    ended: E | None = None


CASES = [
    # 0 - first sight below the high watermark: the clock starts now, no episode yet (the first poll that saw
    #     the LSO there is the earliest start anyone observed: an episode may start late, never early).
    pytest.param(Case(None, (seen(10, 20),), 0, track(10, 0)), id="00-first-sight-starts-the-clock"),

    # 1 - first sight at the high watermark: nothing pending behind the LSO; the track remembers it caught up.
    pytest.param(Case(None, (seen(20, 20),), 0, track(20, 0, caught_up=True)), id="01-first-sight-caught-up"),

    # 2 - the same LSO below the high watermark for 29.999 s: under the threshold, the clock runs on.
    pytest.param(Case(track(10, 0), (seen(10, 30),), 29_999, track(10, 0)), id="02-held-under-threshold"),

    # 3 - the same LSO for exactly lso_stall_ms: the episode opens (>=), started when the clock did, with the
    #     producer whose transaction starts at the LSO as its blocker.
    pytest.param(Case(track(10, 0), (seen(10, 30),), 30_000, track(10, 0, E(0, 30_000, 10, 20, 20)),
                      active=E(0, 30_000, 10, 20, 20)), id="03-episode-opens-at-threshold"),

    # 4 - the episode goes on: last seen and the gap follow the poll, the max gap grows with it.
    pytest.param(Case(track(10, 0, E(0, 30_000, 10, 20, 20)), (seen(10, 45),), 45_000,
                      track(10, 0, E(0, 45_000, 10, 35, 35)), active=E(0, 45_000, 10, 35, 35)),
                 id="04-episode-continues"),

    # 5 - the gap shrinks (the high watermark fell back after a leader change): the max gap keeps its maximum.
    pytest.param(Case(track(10, 0, E(0, 45_000, 10, 35, 35)), (seen(10, 25),), 60_000,
                      track(10, 0, E(0, 60_000, 10, 15, 35)), active=E(0, 60_000, 10, 15, 35)),
                 id="05-max-gap-keeps-its-maximum"),

    # 6 - the blocker is not found this poll (DescribeProducers did not list it): the episode keeps the one it
    #     knew, since an LSO that did not move is held by the same transaction.
    pytest.param(Case(track(10, 0, E(0, 30_000, 10, 20, 20)), (seen(10, 30, blocker_epoch=None),), 45_000,
                      track(10, 0, E(0, 45_000, 10, 20, 20)), active=E(0, 45_000, 10, 20, 20)),
                 id="06-unknown-blocker-keeps-the-known-one"),

    # 7 - the blocker is seen with a new epoch (the coordinator bumped it): the episode follows the poll.
    pytest.param(Case(track(10, 0, E(0, 30_000, 10, 20, 20)), (seen(10, 30, blocker_epoch=4),), 45_000,
                      track(10, 0, E(0, 45_000, 10, 20, 20, (9, 4, "blocker"))),
                      active=E(0, 45_000, 10, 20, 20, (9, 4, "blocker"))), id="07-blocker-epoch-follows-the-poll"),

    # 8 - no producer at the LSO when the stall opens: the blocker is unknown (None), the stall is real anyway.
    pytest.param(Case(track(10, 0), (seen(10, 30, blocker_epoch=None),), 30_000,
                      track(10, 0, E(0, 30_000, 10, 20, 20, (None, None, None))),
                      active=E(0, 30_000, 10, 20, 20, (None, None, None))), id="08-stall-with-unknown-blocker"),

    # 9 - the LSO moves (the transaction ended, the next one is open): the episode ends now with the gap the
    #     poll saw, and the new LSO starts a fresh clock.
    pytest.param(Case(track(10, 0, E(0, 45_000, 10, 35, 35)), (seen(40, 50),), 60_000, track(40, 60_000),
                      ended=E(0, 60_000, 10, 10, 35, ended=60_000)), id="09-lso-moves-episode-ends"),

    # 10 - the LSO catches up with the high watermark: the episode ends with no gap; the track is caught up.
    pytest.param(Case(track(10, 0, E(0, 45_000, 10, 35, 35)), (seen(50, 50),), 60_000,
                      track(50, 60_000, caught_up=True), ended=E(0, 60_000, 10, 0, 35, ended=60_000)),
                 id="10-lso-catches-up-episode-ends"),

    # 11 - the high watermark falls back to the LSO, which did not move (an unclean leader election truncated
    #      the log): nothing waits behind the LSO any more, so the episode ends with no gap and the track is
    #      caught up, though the LSO is where it stalled.
    pytest.param(Case(track(10, 0, E(0, 45_000, 10, 35, 35)), (seen(10, 10),), 60_000,
                      track(10, 60_000, caught_up=True), ended=E(0, 60_000, 10, 0, 35, ended=60_000)),
                 id="11-hwm-falls-back-to-the-lso"),

    # 12 - an LSO that sat at the high watermark, now below it at the same offset (a transaction opened): a
    #      fresh clock, not a stall as old as the idle hour before it.
    pytest.param(Case(track(10, 0, caught_up=True), (seen(10, 20),), 3_600_000, track(10, 3_600_000)),
                 id="12-caught-up-then-open-starts-fresh"),

    # 13 - the offsets are unknown this poll (ListOffsets failed): the track and its episode are kept as they
    #      were, neither extended nor ended.
    pytest.param(Case(track(10, 0, E(0, 30_000, 10, 20, 20)), (seen(None, None),), 45_000,
                      track(10, 0, E(0, 30_000, 10, 20, 20)), active=E(0, 30_000, 10, 20, 20)),
                 id="13-unknown-offsets-keep-the-episode"),

    # 14 - unknown offsets for a partition never tracked: nothing to keep, nothing to start.
    pytest.param(Case(None, (seen(None, None),), 0, None), id="14-unknown-offsets-untracked"),

    # 15 - the partition is gone from the poll (deleted, or no longer watched) during an episode: it ends now.
    pytest.param(Case(track(10, 0, E(0, 30_000, 10, 20, 20)), (partition(tp=TP1, hwm=5, lso=5),), 45_000, None,
                      ended=E(0, 45_000, 10, 20, 20, ended=45_000)), id="15-partition-gone-episode-ends"),

    # 16 - the partition is gone without an episode: its track is forgotten, nothing ends.
    pytest.param(Case(track(10, 0), (partition(tp=TP1, hwm=5, lso=5),), 45_000, None), id="16-partition-gone-quietly"),

    # 17 - the poll learnt nothing about partitions at all (Metadata answered, every leader down): every track
    #      and episode is kept; ending them would split one stall into two incidents.
    pytest.param(Case(track(10, 0, E(0, 30_000, 10, 20, 20)), (), 45_000, track(10, 0, E(0, 30_000, 10, 20, 20)),
                      active=E(0, 30_000, 10, 20, 20)), id="17-empty-poll-keeps-everything"),
]


@pytest.mark.parametrize("case", CASES)
def test_episode_transition(case: Case) -> None:
    snap = snapshot(partitions=case.poll, txns=(txn(txn_id="blocker", pid=9, epoch=3),), at=case.now)
    tracks, active, ended = update_lso({} if case.before is None else {TP: case.before}, snap, case.now, S)
    assert tracks.get(TP) == case.after
    assert [read(e) for e in active if e.tp == TP] == ([] if case.active is None else [case.active])
    assert [read(e) for e in ended] == ([] if case.ended is None else [case.ended])
