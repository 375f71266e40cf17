"""Rows as the recorder writes them, for API tests and the benchmark.

``seed_scenario`` builds one realistic picture of two clusters (the one every API test
reads); the small builders make anything else a test needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy.orm import Session

from txnwatch.core.epoch import to_ms
from txnwatch.store import models as m

PROD, STAGING = "prod", "staging"
BOOTSTRAP = {PROD: ["kafka-0.prod:9092", "kafka-1.prod:9092"], STAGING: ["kafka.staging:9092"]}
BULK = 230  # enough bulk transactions for several pages


UNREADABLE = ("record_over_budget: record 55: it lies past the first 8 MiB that its gzip batch (offset 50, "
              "209,712 bytes) decompresses to, the budget for one batch")


def ago(now: datetime, seconds: float) -> datetime:
    return now - timedelta(seconds=seconds)


class Factory:
    def __init__(self, session: Session, now: datetime) -> None:
        self.session = session
        self.now = now

    def add(self, row: Any) -> Any:
        self.session.add(row)
        return row

    def cluster(self, name: str, *, up: bool = True, error: str | None = None, polled_ago: float = 5) -> m.Cluster:
        at = ago(self.now, polled_ago)
        cluster = self.add(m.Cluster(name=name, bootstrap_servers=",".join(BOOTSTRAP.get(name, ["k:9092"])), up=up,
                                     last_poll_at=at, last_success_at=at if up else ago(self.now, 600),
                                     last_error=error, created_at=ago(self.now, 86400)))
        self.session.flush()
        return cluster

    def poll(self, cluster: m.Cluster, seconds_ago: float, ok: bool = True) -> m.Poll:
        return self.add(m.Poll(cluster_id=cluster.id, started_at=ago(self.now, seconds_ago), duration_ms=40, ok=ok,
                               error_count=0 if ok else 1, error=None if ok else "NoBrokersAvailable"))

    def txn(self, cluster: m.Cluster, transactional_id: str, state: str = "Ongoing", *, age: float | None = 30,
            partitions: list[str] | None = None, producer_id: int = 1000, epoch: int = 0, timeout_ms: int = 60_000,
            coordinator: int = 1, gone: bool = False) -> m.TransactionState:
        return self.add(m.TransactionState(
            cluster_id=cluster.id, transactional_id=transactional_id, coordinator_id=coordinator, state=state,
            producer_id=producer_id, producer_epoch=epoch, timeout_ms=timeout_ms,
            txn_started_at=None if age is None else ago(self.now, age), partitions=partitions or [],
            first_seen_at=ago(self.now, 3600), last_seen_at=ago(self.now, 5),
            gone_at=ago(self.now, 60) if gone else None))

    def transition(self, cluster: m.Cluster, transactional_id: str, seconds_ago: float, from_state: str | None,
                   to_state: str, *, producer_id: int = 1000, epoch: int = 0, events: list[str] | None = None,
                   partitions: list[str] | None = None, duration_ms: int | None = None) -> m.TransactionTransition:
        at = to_ms(ago(self.now, seconds_ago))
        return self.add(m.TransactionTransition(
            cluster_id=cluster.id, source=m.POLL, transactional_id=transactional_id, at_ms=at, staged_at_ms=at,
            from_state=from_state, to_state=to_state, producer_id=producer_id, producer_epoch=epoch,
            prev_producer_id=producer_id if from_state else None, prev_producer_epoch=epoch if from_state else None,
            timeout_ms=60_000, start_ms=at, partitions=m.joined(partitions or []),
            events=m.joined(events or []), duration_ms=duration_ms))

    def offsets(self, cluster: m.Cluster, seconds_ago: float,
                rows: list[tuple[str, int, int, int, int, int]]) -> None:
        """rows: (topic, partition, high watermark, LSO, log start, open transactions)."""
        at = ago(self.now, seconds_ago)
        for topic, partition, hwm, lso, start, open_txns in rows:
            self.add(m.PartitionOffsetSample(cluster_id=cluster.id, topic=topic, partition=partition, sampled_at=at,
                                             leader=partition % 3, high_watermark=hwm, last_stable_offset=lso,
                                             log_start_offset=start, open_transactions=open_txns))

    def lag(self, cluster: m.Cluster, seconds_ago: float, group: str,
            rows: list[tuple[str, int, int, int | None, int | None, float | None]],
            unknown: dict[tuple[str, int], str] | None = None) -> None:
        """rows: (topic, partition, committed offset, lag vs HWM, lag vs LSO, lag seconds); ``unknown``: why the
        lag seconds of (topic, partition) are unknown."""
        at = ago(self.now, seconds_ago)
        for topic, partition, committed, lag_hwm, lag_lso, secs in rows:
            self.add(m.ConsumerLagSample(cluster_id=cluster.id, group_id=group, topic=topic, partition=partition,
                                         sampled_at=at, committed_offset=committed, lag_hwm=lag_hwm, lag_lso=lag_lso,
                                         lag_seconds=secs,
                                         lag_seconds_unknown=(unknown or {}).get((topic, partition))))

    def hanging(self, cluster: m.Cluster, topic: str, partition: int, *, transactional_id: str | None,
                producer_id: int, first_seen_ago: float, resolved_ago: float | None = None,
                reason: str = "unknown_to_coordinator") -> m.HangingEpisode:
        return self.add(m.HangingEpisode(
            cluster_id=cluster.id, incident_key=f"{cluster.name}/{topic}-{partition}/{producer_id}", topic=topic,
            partition=partition, producer_id=producer_id, producer_epoch=3, transactional_id=transactional_id,
            coordinator_id=None if transactional_id is None else 1, reason=reason, txn_start_offset=420,
            last_write_at=ago(self.now, first_seen_ago + 900), first_seen_at=ago(self.now, first_seen_ago),
            last_seen_at=ago(self.now, resolved_ago or 5),
            resolved_at=None if resolved_ago is None else ago(self.now, resolved_ago)))

    def stall(self, cluster: m.Cluster, topic: str, partition: int, *, started_ago: float,
              ended_ago: float | None = None, transactional_id: str | None = None) -> m.LsoStallEpisode:
        return self.add(m.LsoStallEpisode(
            cluster_id=cluster.id, topic=topic, partition=partition, started_at=ago(self.now, started_ago),
            ended_at=None if ended_ago is None else ago(self.now, ended_ago),
            last_seen_at=ago(self.now, ended_ago or 5),
            stalled_lso=420, max_gap=1500, blocking_producer_id=2001, blocking_producer_epoch=3,
            blocking_transactional_id=transactional_id))

    def verification(self, cluster: m.Cluster, seconds_ago: float, ms: int | None, failed: bool = False) -> None:
        self.add(m.VerificationSample(cluster_id=cluster.id, topic="orders", partition=0, producer_id=1000,
                                      transactional_id="orders-app-0_0", observed_at=ago(self.now, seconds_ago),
                                      verification_ms=ms, failed=failed))

    def alert(self, cluster: m.Cluster | None, rule: str, state: str, started_ago: float) -> m.Alert:
        return self.add(m.Alert(
            cluster_id=cluster.id if cluster else None, rule=rule,
            incident_key=f"{cluster.name if cluster else 'txnwatch'}/{rule}/{started_ago}", state=state,
            severity="critical", summary=f"{rule} on {cluster.name if cluster else 'txnwatch'}",
            labels={"rule": rule}, details={"started_ago": started_ago}, started_at=ago(self.now, started_ago),
            fired_at=ago(self.now, started_ago - 1) if state != "pending" else None,
            resolved_at=ago(self.now, 1) if state == "resolved" else None, last_seen_at=ago(self.now, 1)))


@dataclass
class Scenario:
    """What seed_scenario wrote, so tests compare against the source instead of repeating numbers."""

    now: datetime
    transactions: dict[str, list[str]] = field(default_factory=dict)  # cluster -> transactional ids (listed)
    gone: list[str] = field(default_factory=list)
    alerts: int = 0


def seed_scenario(session: Session, now: datetime | None = None) -> Scenario:
    now = now or datetime.now(timezone.utc)
    f = Factory(session, now)
    sc = Scenario(now=now)
    prod, staging = f.cluster(PROD), f.cluster(STAGING, up=False, error="NoBrokersAvailable: kafka.staging:9092")
    for i in range(6):
        f.poll(prod, 15 * i + 5, ok=i != 3)
    f.poll(staging, 5, ok=False)

    prod_ids = [
        f.txn(prod, "orders-app-0_0", age=120, partitions=["orders-0", "orders-1"], producer_id=2001, epoch=3),
        f.txn(prod, "orders-app-0_1", age=10, partitions=["orders-2"], producer_id=2002),
        f.txn(prod, "payments/tx-1", "PrepareCommit", age=45, partitions=["payments-eu-0"], producer_id=3001),
        f.txn(prod, "payments-eu-writer", age=5, partitions=["payments-0"], producer_id=3002),
        f.txn(prod, "idle-1", "Empty", age=None, producer_id=4001),
        f.txn(prod, "done-1", "CompleteCommit", age=1000, partitions=[], producer_id=4002),
    ]
    states = ["Ongoing", "Empty", "CompleteCommit", "CompleteAbort", "PrepareAbort"]
    for i in range(BULK):
        state = states[i % len(states)]
        prod_ids.append(f.txn(prod, f"bulk-{i:04d}", state, age=None if state == "Empty" else 200 + (i % 37) * 3,
                              partitions=[f"bulk-{i % 4}-0"], producer_id=10_000 + i))
    f.txn(prod, "expired-1", age=5000, partitions=["orders-3"], producer_id=4003, gone=True)
    sc.gone.append("expired-1")
    sc.transactions[PROD] = [t.transactional_id for t in prod_ids]
    sc.transactions[STAGING] = [f.txn(staging, f"staging-app-{i}", age=20 + i, partitions=["orders-0"],
                                      producer_id=500 + i).transactional_id for i in range(3)]

    for seconds, frm, to, events in [(3600, None, "Empty", []), (600, "Empty", "Ongoing", []),
                                     (300, "Ongoing", "PrepareAbort", ["timeout_abort"]),
                                     (290, "PrepareAbort", "CompleteAbort", ["epoch_bump"]),
                                     (120, "CompleteAbort", "Ongoing", [])]:
        f.transition(prod, "orders-app-0_0", seconds, frm, to, producer_id=2001, epoch=3 if seconds < 295 else 2,
                     events=events, partitions=["orders-0", "orders-1"])
    f.transition(prod, "payments/tx-1", 45, "Ongoing", "PrepareCommit", producer_id=3001)

    # An open hanging episode on a known id, one with no transactional id, a resolved one.
    f.hanging(prod, "orders", 0, transactional_id="orders-app-0_0", producer_id=2001, first_seen_ago=100,
              reason="partition_not_listed")
    f.hanging(prod, "orders", 3, transactional_id=None, producer_id=7777, first_seen_ago=50)
    f.hanging(prod, "orders", 1, transactional_id="old-1", producer_id=6000, first_seen_ago=7200, resolved_ago=3600)

    f.stall(prod, "orders", 0, started_ago=90, transactional_id="orders-app-0_0")
    f.stall(prod, "orders", 1, started_ago=4000, ended_ago=3600)
    f.stall(prod, "orders", 2, started_ago=4 * 86400, ended_ago=3 * 86400)

    older = [("orders", p, 900, 900, 0, 0) for p in range(4)]
    latest = [("orders", 0, 1920, 420, 10, 1), ("orders", 1, 1000, 990, 10, 1), ("orders", 2, 800, 800, 0, 0),
              ("orders", 3, 600, 420, 0, 1), ("payments", 0, 50, 50, 0, 1), ("payments-eu", 0, 70, 60, 0, 1)]
    latest += [(f"bulk-{p}", 0, 10, 10, 0, 0) for p in range(4)]
    f.offsets(prod, 20, older)
    f.offsets(prod, 5, latest)
    f.offsets(staging, 30, [("orders", 0, 5, 5, 0, 0)])

    f.lag(prod, 20, "old-group", [("orders", 0, 100, 800, 800, 60.0)])
    f.lag(prod, 20, "orders-consumer", [("orders", p, 800, 100, 100, 9.0) for p in range(4)])
    f.lag(prod, 5, "orders-consumer", [("orders", 0, 400, 1520, 20, 30.0), ("orders", 1, 990, 10, 0, 0.0),
                                       ("orders", 2, 800, 0, 0, None), ("orders", 3, 400, 200, 20, 12.5)])
    f.lag(prod, 5, "audit/readers", [("payments", 0, 40, 10, 10, 2.0), ("payments-eu", 0, 55, 15, 5, None)],
          unknown={("payments-eu", 0): UNREADABLE})

    for ms in range(1, 101):
        f.verification(prod, 10 + ms, ms)
    for i in range(5):
        f.verification(prod, 30 + i, None, failed=True)
    f.verification(prod, 2 * 3600, 99_999)  # outside the default one-hour window

    for i, (cluster, rule, state) in enumerate([(prod, "hanging_transaction", "firing"),
                                                (prod, "lso_stall", "pending"),
                                                (prod, "lso_stall", "resolved"),
                                                (staging, "cluster_down", "firing"),
                                                (None, "database_unreachable", "resolved")]):
        f.alert(cluster, rule, state, started_ago=100 * (i + 1))
        sc.alerts += 1
    session.commit()
    return sc
