"""Old samples thinned to one per window, keeping the first sample of each pinned LSO (issue 25: sizable storage)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, func, select

from txnwatch.store import context
from txnwatch.store import models as m
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.downsample import downsample

T0 = datetime(2026, 6, 1, 9, 0, tzinfo=timezone.utc)  # on the hour
NOW = T0 + timedelta(hours=3)
STEP = timedelta(seconds=15)
PIN_AT = T0 + timedelta(minutes=20)  # a transaction opens at offset 80 and stays open 10 minutes
PIN_END = PIN_AT + timedelta(minutes=10)


def _fill(engine: Engine) -> int:
    """A partition whose HWM moves every poll for 3 hours, with one pin; and lag samples every 5 minutes."""
    sessions = make_sessionmaker(engine)
    with sessions.begin() as s:
        cluster = m.Cluster(name="c", bootstrap_servers="h:1", created_at=T0)
        s.add(cluster)
        s.flush()
        at, hwm = T0, 0
        while at < NOW:
            hwm += 1
            lso = 80 if PIN_AT <= at < PIN_END else hwm
            s.add(m.PartitionOffsetSample(cluster_id=cluster.id, topic="t", partition=0, sampled_at=at,
                                          high_watermark=hwm, last_stable_offset=lso, log_start_offset=0))
            if at.minute % 5 == 0 and at.second == 0:
                for group in ("g1", "g2"):
                    s.add(m.ConsumerLagSample(cluster_id=cluster.id, group_id=group, topic="t", partition=0,
                                              sampled_at=at, committed_offset=hwm, lag_hwm=0, lag_lso=0))
            at += STEP
        return cluster.id


def _count(engine: Engine, model: type[m.Base], since: datetime | None = None,
           until: datetime | None = None) -> int:
    column = model.__table__.c.sampled_at
    stmt = select(func.count()).select_from(model)
    if since is not None:
        stmt = stmt.where(column >= since)
    if until is not None:
        stmt = stmt.where(column < until)
    with make_sessionmaker(engine)() as s:
        return s.scalar(stmt) or 0


def test_old_samples_thinned_recent_ones_kept_and_the_first_pin_still_answers(engine: Engine) -> None:
    cluster_id = _fill(engine)
    sessions = make_sessionmaker(engine)
    key = context.PartitionKey(cluster_id, "t", 0)
    with sessions() as s:
        pinned_before = context.first_pinned_many(s, [(key, 80)])
        latest_before = context.latest_samples(s, [key])[key]
    recent_offsets, recent_lag = _count(engine, m.PartitionOffsetSample, NOW - timedelta(hours=1)), \
        _count(engine, m.ConsumerLagSample, NOW - timedelta(hours=1))

    deleted = downsample(sessions, NOW, after=timedelta(hours=1), every=timedelta(minutes=60))

    cutoff = NOW - timedelta(hours=1)
    # Two old hours: per hour the first sample, plus the first sample of the pin (the pin lies in the first hour).
    assert _count(engine, m.PartitionOffsetSample, until=cutoff) == 3
    assert deleted["partition_offsets"] == 2 * 240 - 3
    # Lag: the first whole sample (both groups) of each old hour.
    assert _count(engine, m.ConsumerLagSample, until=cutoff) == 2 * 2
    assert deleted["lag_samples"] == 2 * (24 - 2)
    # Nothing newer than the cutoff is touched.
    assert _count(engine, m.PartitionOffsetSample, cutoff) == recent_offsets == 240
    assert _count(engine, m.ConsumerLagSample, cutoff) == recent_lag == 24
    with sessions() as s:
        assert context.first_pinned_many(s, [(key, 80)]) == pinned_before
        assert pinned_before[(key, 80)].replace(tzinfo=timezone.utc) == PIN_AT
        assert context.latest_samples(s, [key])[key] == latest_before
    # A second run finds nothing more to let go.
    assert downsample(sessions, NOW, after=timedelta(hours=1), every=timedelta(minutes=60)) == {
        "partition_offsets": 0, "lag_samples": 0}


def test_a_zero_window_keeps_everything(engine: Engine) -> None:
    _fill(engine)
    before = _count(engine, m.PartitionOffsetSample), _count(engine, m.ConsumerLagSample)
    assert downsample(make_sessionmaker(engine), NOW, after=timedelta(hours=1), every=timedelta(0)) == {
        "partition_offsets": 0, "lag_samples": 0}
    assert (_count(engine, m.PartitionOffsetSample), _count(engine, m.ConsumerLagSample)) == before
