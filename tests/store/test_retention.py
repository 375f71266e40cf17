"""Retention deletes old history in batches and never what is still open or undelivered."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, func, select

from txnwatch.store import models as m
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.retention import purge

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=timezone.utc)


def count(engine: Engine, model: type[m.Base]) -> int:
    with make_sessionmaker(engine)() as s:
        return s.scalar(select(func.count()).select_from(model)) or 0


def test_purge_keeps_recent_and_open_rows(engine: Engine) -> None:
    sessions = make_sessionmaker(engine)
    old, new = NOW - timedelta(days=30), NOW - timedelta(days=1)
    with sessions.begin() as s:
        cluster = m.Cluster(name="c", bootstrap_servers="h:1", created_at=old)
        s.add(cluster)
        s.flush()
        for i in range(23):
            s.add(m.PartitionOffsetSample(cluster_id=cluster.id, topic="t", partition=i % 3, sampled_at=old,
                                          high_watermark=i, last_stable_offset=i, log_start_offset=0))
        s.add(m.PartitionOffsetSample(cluster_id=cluster.id, topic="t", partition=0, sampled_at=new,
                                      high_watermark=1, last_stable_offset=1, log_start_offset=0))
        episode = dict(cluster_id=cluster.id, topic="t", partition=0, stalled_lso=5, max_gap=3, last_seen_at=old)
        s.add(m.LsoStallEpisode(started_at=old, ended_at=old, **episode))
        s.add(m.LsoStallEpisode(started_at=old - timedelta(days=1), ended_at=None, **episode))
        firing = m.Alert(cluster_id=cluster.id, rule="r", incident_key="k", state="resolved", severity="critical",
                         summary="s", labels={}, details={}, started_at=old, resolved_at=old, last_seen_at=old)
        s.add(firing)
        s.flush()
        s.add(m.OutboxEvent(alert_id=firing.id, channel="pagerduty", action="resolve", dedup_key="k", payload={},
                            status="pending", created_at=old, next_attempt_at=old))
    deleted = purge(sessions, NOW, days=14, batch=10)
    assert deleted["partition_offsets"] == 23
    assert count(engine, m.PartitionOffsetSample) == 1
    assert count(engine, m.LsoStallEpisode) == 1
    # The resolved alert still has an undelivered resolve: both stay until it is sent.
    assert count(engine, m.Alert) == 1
    assert count(engine, m.OutboxEvent) == 1
