"""Lag rows at the operator's interval, capped groups only, and what the API reads from them (issue 23, item 5)."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, func, select

from txnwatch import detect
from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, PartitionSnapshot, TopicPartition
from txnwatch.store import models as m
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.lag_sampling import LagSampling
from txnwatch.store.queries import list_groups
from txnwatch.store.recorder import Recorder

T0 = 1_700_000_100_000  # a multiple of 300 s: polls at T0 + k * 15 s fall into 5-minute windows from T0
TP = TopicPartition("orders", 0)


@pytest.mark.parametrize(("interval_s", "polls_s", "written_s"), [
    pytest.param(0, [0, 15, 30], [0, 15, 30], id="0-writes-every-poll"),
    pytest.param(300, [0, 15, 285, 300, 315, 600], [0, 300, 600], id="one-per-window-aligned-to-the-clock"),
    pytest.param(300, [290, 310, 320], [290, 310], id="windows-not-elapsed-time-a-late-poll-starts-a-new-one"),
    pytest.param(60, [0, 200, 201], [0, 200], id="a-gap-longer-than-the-interval-writes-at-once"),
])
def test_due(interval_s: float, polls_s: list[int], written_s: list[int]) -> None:
    sampling = LagSampling({"c": interval_s})
    assert [t for t in polls_s if sampling.due("c", T0 + t * 1000)] == written_s


def test_clusters_have_their_own_windows_and_default() -> None:
    sampling = LagSampling({"slow": 300}, default_s=0)
    assert [sampling.due(c, T0) for c in ("slow", "fast", "slow", "fast")] == [True, True, False, True]


def poll(at_ms: int, groups: int, committed: int = 90) -> ClusterSnapshot:
    return ClusterSnapshot(
        cluster="c", taken_at_ms=at_ms, duration_ms=5,
        partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=100, last_stable_offset=100, producers=())},
        groups={f"g{i:03d}": GroupSnapshot(f"g{i:03d}", "Empty", "consumer", {TP: committed - i})
                for i in range(groups)})


def test_lag_rows_once_per_interval_for_kept_groups_and_the_api_lists_them(engine: Engine) -> None:
    sessions = make_sessionmaker(engine)
    recorder = Recorder(sessions, {"c": "h:9092"}, lag_sampling=LagSampling({"c": 300}))
    recorder.start()
    settings = detect.DetectionSettings(max_groups=10)
    state = detect.INITIAL
    for k in range(21):  # 5 minutes of 15-second polls, and the first of the next window
        at = T0 + k * 15_000
        state, findings = detect.evaluate(state, poll(at, groups=40, committed=90 + k), at, settings)
        recorder.on_poll("c", poll(at, groups=40, committed=90 + k), findings, None, at)
    with sessions() as session:
        rows = session.scalar(select(func.count()).select_from(m.ConsumerLagSample))
        times = session.scalars(select(m.ConsumerLagSample.sampled_at).distinct()).all()
        groups = list_groups(session, ["c"], after=None, limit=100)
    assert len(times) == 2 and rows == 2 * 10  # two samples of the 10 kept groups, not 21 polls of 40
    # The API lists the latest sample: the 10 most lagging groups (g039 lags most), as /metrics shows them.
    assert [g.group_id for g in groups] == [f"g{i:03d}" for i in range(30, 40)]
    assert {g.sampled_at for g in groups} == {max(times)}
    assert groups[-1].lag_hwm == 100 - (90 + 20 - 39)


def test_a_sample_larger_than_one_insert_chunk_is_written_whole_in_chunks(engine: Engine) -> None:
    """Issue 25, RSS: 2,500 lag rows go in as 1,000 + 1,000 + 500 (the transient of parameters is one chunk's),
    and every row arrives with its own lag, in the same transaction as the poll's other rows.  On SQLite each
    chunk is cut further into multi-row statements of power-of-two sizes (store/row_inserts.py)."""
    from sqlalchemy import event

    from txnwatch.store.recorder import INSERT_CHUNK_ROWS

    batches: list[int] = []

    def count(conn: object, cursor: object, statement: str, parameters: object, context: object,
              executemany: bool) -> None:
        if statement.startswith(f"INSERT INTO {m.ConsumerLagSample.__tablename__}"):
            # an executemany's list of rows; a multi-row statement's flat values, one "(?, ..)" per row
            batches.append(len(parameters) if executemany else statement.count("(?"))  # type: ignore[arg-type]

    event.listen(engine, "before_cursor_execute", count)
    sessions = make_sessionmaker(engine)
    recorder = Recorder(sessions, {"c": "h:9092"}, lag_sampling=LagSampling({"c": 0}))
    recorder.start()
    snapshot = ClusterSnapshot(
        cluster="c", taken_at_ms=T0, duration_ms=5,
        partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=10_000, last_stable_offset=10_000, producers=())},
        groups={f"g{i:04d}": GroupSnapshot(f"g{i:04d}", "Empty", "consumer", {TP: i}) for i in range(2_500)})
    _, findings = detect.evaluate(detect.INITIAL, snapshot, T0, detect.DetectionSettings(max_groups=10_000,
                                                                                          max_group_partitions=10_000))
    recorder.on_poll("c", snapshot, findings, None, T0)
    event.remove(engine, "before_cursor_execute", count)
    with sessions() as session:
        lags = dict(session.execute(select(m.ConsumerLagSample.group_id, m.ConsumerLagSample.lag_hwm)).all())
    if engine.dialect.name == "sqlite":  # 1,000 = 15 x 64 + 32 + 8; 500 = 7 x 64 + 32 + 16 + 4
        assert batches == ([64] * 15 + [32, 8]) * 2 + [64] * 7 + [32, 16, 4]
    else:
        assert INSERT_CHUNK_ROWS == 1_000 and batches == [1_000, 1_000, 500]
    assert lags == {f"g{i:04d}": 10_000 - i for i in range(2_500)}
