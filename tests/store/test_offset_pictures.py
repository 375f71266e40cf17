"""Partition offsets written on change and per heartbeat answer every reader as writing every poll did (issue 25)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from tests.fixtures.migrated import migrate
from txnwatch.core.epoch import from_ms
from txnwatch.core.model import ClusterSnapshot, PartitionSnapshot, ProducerState, TopicPartition
from txnwatch.store import context, queries
from txnwatch.store import models as m
from txnwatch.store.db import make_engine, make_sessionmaker
from txnwatch.store.offset_pictures import OffsetPictures
from txnwatch.store.recorder import Recorder

T0 = 1_700_000_100_000  # a multiple of 300 s
A, B = TopicPartition("orders", 0), TopicPartition("orders", 1)


@pytest.mark.parametrize(("interval_s", "polls", "written_s"), [
    pytest.param(0, [(0, "x"), (15, "x"), (30, "x")], [0, 15, 30], id="0-writes-every-poll"),
    pytest.param(300, [(0, "x"), (15, "x"), (30, "y"), (45, "y"), (60, "x")], [0, 30, 60],
                 id="a-change-writes-an-unchanged-poll-does-not-even-back-to-an-older-picture"),
    pytest.param(300, [(0, "x"), (15, "x"), (285, "x"), (300, "x"), (315, "x")], [0, 300],
                 id="the-first-poll-of-each-window-aligned-to-the-clock-is-the-heartbeat"),
])
def test_due(interval_s: float, polls: list[tuple[int, str]], written_s: list[int]) -> None:
    pictures = OffsetPictures({"c": interval_s})
    written = []
    for t, shown in polls:
        picture = ((shown,),)
        if pictures.due("c", picture, T0 + t * 1000):
            pictures.written("c", picture, T0 + t * 1000)
            written.append(t)
    assert written == written_s


def test_nothing_is_remembered_until_committed_and_forget_writes_again() -> None:
    pictures = OffsetPictures(default_s=300)
    assert pictures.due("c", (("x",),), T0)
    assert pictures.due("c", (("x",),), T0 + 15_000)  # the first was never reported written (a failed write)
    pictures.written("c", (("x",),), T0 + 15_000)
    assert not pictures.due("c", (("x",),), T0 + 30_000)
    pictures.forget()  # the database failed: it may come back restored
    assert pictures.due("c", (("x",),), T0 + 45_000)


def _snapshot(at_ms: int, offsets: dict[TopicPartition, tuple[int, int, bool]]) -> ClusterSnapshot:
    def producers(open_txn: bool, lso: int) -> tuple[ProducerState, ...]:
        return (ProducerState(producer_id=7, producer_epoch=1, last_sequence=3, last_timestamp_ms=at_ms,
                              coordinator_epoch=0, current_txn_start_offset=lso if open_txn else -1),)
    return ClusterSnapshot(cluster="c", taken_at_ms=at_ms, duration_ms=5, partitions={
        tp: PartitionSnapshot(tp, leader=1, high_watermark=hwm, last_stable_offset=lso, log_start_offset=0,
                              producers=producers(open_txn, lso))
        for tp, (hwm, lso, open_txn) in offsets.items()})


def _polls(seed: int, count: int) -> list[ClusterSnapshot]:
    """Mostly idle partitions that sometimes move, open a transaction (LSO pinned), or vanish for a while."""
    rng = random.Random(seed)
    state: dict[TopicPartition, list[Any]] = {A: [10, 10, False], B: [20, 20, False]}
    snaps = []
    for k in range(count):
        for s in state.values():
            roll = rng.random()
            if roll < 0.15:
                s[0] += rng.randint(1, 5)
                s[1] = s[0] if not s[2] else s[1]
            elif roll < 0.22:
                s[2] = not s[2]
                s[1] = s[1] if s[2] else s[0]
        shown = {tp: (s[0], s[1], s[2]) for tp, s in state.items() if not (tp == B and 20 <= k % 40 < 24)}
        snaps.append(_snapshot(T0 + k * 15_000 + rng.randint(0, 900), shown))
    return snaps


def _answers(engine: Engine, at_ms: int) -> dict[str, Any]:
    """What every reader of partition_offsets answers, with the sample times left out where they may differ."""
    keys = [context.PartitionKey(1, tp.topic, tp.partition) for tp in (A, B)]
    strip = ("id", "sampled_at")
    with make_sessionmaker(engine)() as session:
        latest = {k: {c: v for c, v in r._mapping.items() if c not in strip}
                  for k, r in context.latest_samples(session, keys).items()}
        listed = [{c: v for c, v in r._mapping.items() if c not in strip}
                  for r in queries.list_partitions(session, ["c"], topic=None, after=None, limit=100)]
        shown = [(s.topic, s.partition, s.high_watermark, s.last_stable_offset)
                 for s in queries.partition_samples(session, 1, ["orders"])]
        pins = [(key, lso) for key in keys for lso in range(200)]
        pinned = context.first_pinned_many(session, pins)
        charts = {}
        for key in keys:
            steps: list[tuple[int | None, int | None]] = []
            for s in context.history(session, key, from_ms(T0 - 1)):
                if not steps or steps[-1] != (s.high_watermark, s.last_stable_offset):
                    steps.append((s.high_watermark, s.last_stable_offset))
            charts[key] = steps
    return {"latest": latest, "listed": sorted(listed, key=lambda r: (r["topic"], r["partition"])),
            "shown": sorted(shown), "pinned": pinned, "charts": charts}


def _migrated(path: Path) -> Engine:
    url = f"sqlite:///{path}"
    migrate(url)
    return make_engine(url)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_changed_pictures_only_answer_as_every_poll_did(tmp_path: Path, seed: int) -> None:
    every, changed = _migrated(tmp_path / "every.db"), _migrated(tmp_path / "changed.db")
    try:
        full = Recorder(make_sessionmaker(every), {"c": "h:9092"}, offset_pictures=OffsetPictures({"c": 0}))
        lean = Recorder(make_sessionmaker(changed), {"c": "h:9092"}, offset_pictures=OffsetPictures({"c": 300}))
        full.start()
        lean.start()
        for snap in _polls(seed, 120):
            full.on_poll("c", snap, None, None, snap.taken_at_ms)
            lean.on_poll("c", snap, None, None, snap.taken_at_ms)
            assert _answers(changed, snap.taken_at_ms) == _answers(every, snap.taken_at_ms)
        rows = [make_sessionmaker(e)().scalar(select(func.count()).select_from(m.PartitionOffsetSample)) or 0
                for e in (every, changed)]
        assert rows[0] == 2 * 120 - 12 and rows[1] < rows[0] * 0.7, rows  # B is away 12 polls; the skips happened
    finally:
        every.dispose()
        changed.dispose()


def test_idle_partitions_cost_one_picture_per_heartbeat(tmp_path: Path) -> None:
    engine = _migrated(tmp_path / "idle.db")
    try:
        rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"}, offset_pictures=OffsetPictures({"c": 300}))
        rec.start()
        for k in range(40):  # 10 minutes of 15-second polls over nothing that moves
            rec.on_poll("c", _snapshot(T0 + k * 15_000, {A: (10, 10, False), B: (20, 20, False)}), None, None, 0)
        with make_sessionmaker(engine)() as session:
            times = session.scalars(select(m.PartitionOffsetSample.sampled_at).distinct()
                                    .order_by(m.PartitionOffsetSample.sampled_at)).all()
            polls = session.scalar(select(func.count()).select_from(m.Poll))
        assert polls == 40
        assert [t.replace(tzinfo=None) for t in times] == [from_ms(T0 + s * 1000).replace(tzinfo=None)
                                                           for s in (0, 300)]
    finally:
        engine.dispose()
