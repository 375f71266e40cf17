"""A small hand-written history whose rollups are worked out independently below."""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from txnwatch.core.epoch import to_ms
from txnwatch.store import models as m

DAY = datetime(2026, 11, 20, tzinfo=timezone.utc)
NEXT_DAY = DAY + timedelta(days=1)

COMMIT, ABORT = ["commit"], ["abort"]
TIMEOUT_ABORT, FENCED = ["abort", "epoch_bump", "timeout_abort"], ["epoch_bump", "fenced"]

# (transactional id, observed at, events, duration ms, partitions)
TRANSITIONS: list[tuple[str, datetime, list[str], int | None, list[str]]] = [
    *[("appA-0", DAY + timedelta(hours=10, minutes=i), COMMIT, 100 * (i + 1), ["orders-0", "orders-1"])
      for i in range(10)],
    ("appA-0", DAY + timedelta(hours=10, minutes=30), ABORT, 5000, ["orders-0"]),
    ("appA-0", DAY + timedelta(hours=10, minutes=40), TIMEOUT_ABORT, 6000, ["orders-0"]),
    ("appA-0", DAY + timedelta(hours=10, minutes=50), FENCED, None, []),
    *[("appA-1", DAY + timedelta(hours=11, minutes=i), COMMIT, 200, ["payments-0"]) for i in range(5)],
    *[("appB-0", NEXT_DAY + timedelta(hours=10), COMMIT, d, ["orders-2"]) for d in (50, 60, 70)],
    ("appB-0", NEXT_DAY + timedelta(hours=9), ["new"], None, []),
]


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def add_cluster(session: Session, name: str = "c1") -> int:
    cluster = m.Cluster(name=name, bootstrap_servers="localhost:9092", created_at=DAY)
    session.add(cluster)
    session.flush()
    return cluster.id


def transition(cluster_id: int, txn_id: str, at: datetime, events: list[str], duration: int | None,
               partitions: list[str]) -> m.TransactionTransition:
    state = "CompleteCommit" if "commit" in events else "CompleteAbort" if "abort" in events else "Empty"
    return m.TransactionTransition(
        cluster_id=cluster_id, source=m.POLL, transactional_id=txn_id, at_ms=to_ms(at), staged_at_ms=to_ms(at),
        from_state="Ongoing", to_state=state, producer_id=7, producer_epoch=1, timeout_ms=60_000, start_ms=to_ms(at),
        partitions=m.joined(partitions), events=m.joined(events), duration_ms=duration)


def seed(engine: Engine) -> dict[str, Any]:
    """Writes the history; returns ids of rows tests mutate later."""
    with Session(engine) as s, s.begin():
        c = add_cluster(s)
        s.add_all(transition(c, *t) for t in TRANSITIONS)
        ten = DAY + timedelta(hours=10)
        s.add_all(m.PartitionOffsetSample(cluster_id=c, topic="orders", partition=0, high_watermark=1000,
                                          sampled_at=ten + timedelta(minutes=k), last_stable_offset=lso)
                  for k, lso in ((5, 400), (6, 1000)))
        s.add(m.LsoStallEpisode(cluster_id=c, topic="orders", partition=0, started_at=ten,
                                ended_at=ten + timedelta(minutes=30), last_seen_at=ten + timedelta(minutes=30),
                                stalled_lso=400, max_gap=500, blocking_transactional_id="appA-0"))
        open_stall = m.LsoStallEpisode(cluster_id=c, topic="orders", partition=1, started_at=DAY + timedelta(hours=12),
                                       ended_at=None, last_seen_at=DAY + timedelta(hours=12, minutes=5),
                                       stalled_lso=9, max_gap=50)
        s.add(open_stall)
        s.add(m.HangingEpisode(cluster_id=c, incident_key="c1/orders-0/7", topic="orders", partition=0, producer_id=7,
                               producer_epoch=1, transactional_id="appA-0", reason="unknown_to_coordinator",
                               first_seen_at=ten, last_seen_at=ten + timedelta(hours=1),
                               resolved_at=ten + timedelta(hours=1)))
        s.add_all(m.VerificationSample(cluster_id=c, topic="orders", partition=0, producer_id=7, observed_at=ten,
                                       verification_ms=ms, failed=ms == 40) for ms in (10, 20, 30, 40))
        s.add_all(m.ConsumerLagSample(cluster_id=c, group_id="g1", topic="orders", partition=0, sampled_at=ten,
                                      committed_offset=1, lag_hwm=lag + 10, lag_lso=lag) for lag in (1, 2, 3, 4, 100))
        s.flush()
        return {"cluster_id": c, "open_stall_id": open_stall.id}
