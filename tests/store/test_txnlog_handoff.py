"""The tail's commits on the writer thread (collect/txnlog_writer.py): nothing lost, reordered or doubled, and the
stored positions never ahead of the stored rows, while the tail reads on during each commit."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.collect import txnlog_tail
from txnwatch.collect.txnlog_tail import ClusterTail, cluster_id_for
from txnwatch.core.model import RequestError, TxnLogRecord
from txnwatch.core.views import POLLING, LatestState
from txnwatch.detect import txnlog as d
from txnwatch.store import models as m
from txnwatch.store import txnlog as store_txnlog

from .test_txnlog_tail import FakeTail, registered, the_log


class Recording(FakeTail):
    """A FakeTail that remembers what it handed out, in order, and how many reads it served."""

    def __init__(self, log: Mapping[int, list[TxnLogRecord]], positions: Mapping[int, int], rng: random.Random,
                 served: list[TxnLogRecord], reads: list[int]) -> None:
        super().__init__(log, positions, rng)
        self._served, self._reads = served, reads

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
        records, problems = super().read(timeout_ms)
        self._served.extend(records)
        self._reads[0] += 1
        return records, problems


class Steady(Recording):
    """Every read brings ``per_partition`` records of each coordinator partition (the log never drains)."""

    per_partition = 2

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
        out: list[TxnLogRecord] = []
        for p, records in sorted(self._log.items()):
            take = records[self._next[p]:self._next[p] + self.per_partition]
            out.extend(take)
            self._next[p] += len(take)
        self._served.extend(out)
        return out, []


def _stored(sessions: sessionmaker[Session]) -> tuple[dict[int, int], list[tuple[int, int]]]:
    """The committed positions, and the stream rows' (partition, offset) in id order, as of one moment: read
    positions, rows, positions again until no commit landed in between (each commit moves a position)."""
    cid = cluster_id_for(sessions, "c")
    X = m.TransactionTransition
    while True:
        with sessions() as session:
            positions = store_txnlog.load(session, cid).positions
        with sessions() as session:
            rows = [(int(p or 0), int(o or 0)) for p, o in session.execute(
                select(X.log_partition, X.log_offset).where(X.cluster_id == cid, X.source == m.TRANSACTION_LOG,
                                                            X.anomaly.is_(None)).order_by(X.id)).all()]
        with sessions() as session:
            if store_txnlog.load(session, cid).positions == positions:
                return positions, rows


def _consistent(positions: Mapping[int, int], rows: list[tuple[int, int]]) -> bool:
    """Every record below a stored position has its row, and no row lies at or past its position."""
    below = sorted((p, o) for p, end in positions.items() for o in range(end))
    return sorted(rows) == below


def test_commits_on_the_writer_keep_every_row_once_in_read_order(engine: Engine, monkeypatch: Any) -> None:
    sessions = registered(engine)
    log = the_log(ids=8, transactions=30)
    served: list[TxnLogRecord] = []
    reads = [0]
    overlapped = [0]  # commits during which the tail served at least one more read
    original = store_txnlog.write_batch

    def slow(session: Session, *args: Any, **kwargs: Any) -> None:
        before = reads[0]
        time.sleep(0.03)  # a commit long enough for the tail's thread to read on
        original(session, *args, **kwargs)
        time.sleep(0.01)
        overlapped[0] += reads[0] > before

    monkeypatch.setattr(store_txnlog, "write_batch", slow)
    clock = [1_000.0]
    tail = ClusterTail("c", "h", lambda p: Recording(log, p, random.Random(3), served, reads), sessions,
                       LatestState(["c"]), clock=lambda: clock[0], read_timeout_ms=0, commit_every_s=0.5)
    ends = {p: len(r) for p, r in log.items()}
    for _ in range(2_000):
        tail.step()
        clock[0] += 0.3  # a commit every other fetch or so
        positions, rows = _stored(sessions)
        assert _consistent(positions, rows), "stored positions and stored rows disagree"
        if len(served) == sum(ends.values()) and positions == ends:
            break
    tail.close()
    positions, rows = _stored(sessions)
    assert positions == ends
    assert rows == [(r.log_partition, r.offset) for r in served]  # each once, in the order read
    assert overlapped[0] > 0  # the tail did read while a commit was in flight


def test_a_commit_that_fails_on_the_writer_is_reported_and_resumed_exactly(engine: Engine, monkeypatch: Any) -> None:
    sessions = registered(engine)
    log = the_log(ids=4, transactions=20)
    calls = [0]
    original = store_txnlog.write_batch

    def third_fails(session: Session, *args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        original(session, *args, **kwargs)
        if calls[0] == 3:
            raise OperationalError("INSERT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(store_txnlog, "write_batch", third_fails)
    clock = [1_000.0]
    state = LatestState(["c"])
    tail = ClusterTail("c", "h", lambda p: FakeTail(log, p, random.Random(5)), sessions, state,
                       clock=lambda: clock[0], read_timeout_ms=0, commit_every_s=0.5)
    ends = {p: len(r) for p, r in log.items()}
    reasons = []
    for _ in range(2_000):
        tail.step()
        view = state.get("c")
        if view is not None and view.history is not None:
            reasons.append((view.history.mode, view.history.reason))
        clock[0] += 0.3 if calls[0] != 3 else txnlog_tail.DB_RETRY_S
        positions, rows = _stored(sessions)
        assert _consistent(positions, rows)
        if positions == ends:
            break
    tail.close()
    assert calls[0] > 3
    assert any(mode == POLLING and reason.startswith("database write failed (OperationalError")
               for mode, reason in reasons)
    positions, rows = _stored(sessions)
    assert positions == ends and len(rows) == len(set(rows)) == sum(ends.values())
    with sessions() as session:
        resumed = store_txnlog.load(session, cluster_id_for(sessions, "c"))
    replayed, found = d.apply(d.TxnLogState(), [r for p in sorted(log) for r in log[p]])
    assert dict(resumed.state.ids) == dict(replayed.ids)
    assert resumed.counters == {k: v for k, v in found.counts.items() if v}


def test_a_stop_commits_the_commit_in_flight_and_what_is_pending(engine: Engine, monkeypatch: Any) -> None:
    sessions = registered(engine)
    log = the_log(ids=4, transactions=10)
    gate = threading.Event()
    original = store_txnlog.write_batch

    def gated(session: Session, *args: Any, **kwargs: Any) -> None:
        gate.wait(5)
        original(session, *args, **kwargs)

    monkeypatch.setattr(store_txnlog, "write_batch", gated)
    served: list[TxnLogRecord] = []
    clock = [1_000.0]
    tail = ClusterTail("c", "h", lambda p: Recording(log, p, random.Random(9), served, [0]), sessions,
                       LatestState(["c"]), clock=lambda: clock[0], read_timeout_ms=0, commit_every_s=0.5)
    gate.set()
    tail.step()  # the first batch commits at once (the periodic check waits for it)
    first = _stored(sessions)[0]
    assert first
    gate.clear()
    clock[0] += 1.0
    for _ in range(4):
        tail.step()  # the first of these hands a commit off (held by the gate), the others wait pending
    assert _stored(sessions)[0] == first  # the held commit has not landed
    threading.Timer(0.2, gate.set).start()
    tail.close()
    positions, rows = _stored(sessions)
    read_to = {p: max((r.offset + 1 for r in served if r.log_partition == p), default=0) for p in log}
    assert positions == {p: o for p, o in read_to.items() if o}
    assert rows == [(r.log_partition, r.offset) for r in served]


def test_a_busy_log_commits_every_busy_interval_without_waiting_for_a_commit_still_running(
        engine: Engine, monkeypatch: Any) -> None:
    """Issue 25: records that keep coming were committed once a second, so a busy log's records were stored up to
    two seconds after their append.  Now they commit ``commit_busy_s`` after the first of them, if the writer is
    free; while its commit still runs the tail reads on instead of waiting, until ``commit_every_s`` makes it
    wait.  Positions still commit with their rows."""
    sessions = registered(engine)
    log = the_log(ids=2, transactions=60)
    served: list[TxnLogRecord] = []
    started: list[dict[int, int]] = []  # the positions of each write, as it starts
    gate = threading.Event()
    gate.set()
    held_too_long = [0]
    original = store_txnlog.write_batch

    def gated(session: Session, cluster_id: int, positions: Any, *args: Any, **kwargs: Any) -> None:
        started.append(dict(positions))
        if not gate.wait(3):
            held_too_long[0] += 1  # the tail's thread waited on this commit while it was held
        original(session, cluster_id, positions, *args, **kwargs)

    monkeypatch.setattr(store_txnlog, "write_batch", gated)

    clock = [1_000.0]
    tail = ClusterTail("c", "h", lambda p: Steady(log, p, random.Random(0), served, [0]), sessions,
                       LatestState(["c"]), clock=lambda: clock[0], read_timeout_ms=0, commit_every_s=1.0,
                       commit_busy_s=0.25, commit_busy_records=4)  # every read brings 4 records: a busy log
    tail.step()  # the first batch commits at once (the periodic check waits for it)
    assert len(started) == 1
    for _ in range(3):
        clock[0] += 0.1
        tail.step()  # the first pending fetch, then 0.1 s and 0.2 s after it: not yet
    assert len(started) == 1
    clock[0] += 0.1
    tail.step()  # 0.3 s: handed to the free writer, without waiting for a second
    assert tail.wait_committed() and len(started) == 2
    assert started[1] == {p: max(r.offset + 1 for r in served if r.log_partition == p) for p in log}
    gate.clear()  # the next commit runs long
    for _ in range(4):
        clock[0] += 0.1
        tail.step()
    for _ in range(300):  # the writer's thread starts the write
        if len(started) == 3:
            break
        time.sleep(0.01)
    assert len(started) == 3  # handed off 0.3 s after its first fetch (the writer was free), now held
    reads = len(served)
    for _ in range(6):
        clock[0] += 0.1
        tail.step()  # from 0.3 s on due by the busy interval, but the writer is busy: the tail reads on
    assert len(started) == 3 and len(served) == reads + 6 * 4 and held_too_long[0] == 0
    threading.Timer(0.3, gate.set).start()
    clock[0] += 0.5  # a second since the first pending fetch: now the tail waits for the writer, then hands off
    tail.step()
    assert tail.wait_committed() and len(started) == 4 and held_too_long[0] == 0
    tail.close()
    positions, rows = _stored(sessions)
    assert rows == [(r.log_partition, r.offset) for r in served]
    assert _consistent(positions, rows)


def test_a_trickle_that_never_drains_commits_once_a_second_not_every_busy_interval(
        engine: Engine, monkeypatch: Any) -> None:
    """Issue 25: on the peers lab a trickle (tens of records a second) brought records with almost every read, so
    the busy interval handed off ~1.3 commits a second, each paying a transaction's fixed cost for a few rows.
    Below ``commit_busy_records`` waiting, records commit a second after the first of them; once that many wait
    (a busy log) they commit at the busy interval as before."""
    sessions = registered(engine)
    log = the_log(ids=2, transactions=60)  # 2 coordinator partitions, 185 records each
    served: list[TxnLogRecord] = []
    started: list[dict[int, int]] = []
    original = store_txnlog.write_batch

    def counted(session: Session, cluster_id: int, positions: Any, *args: Any, **kwargs: Any) -> None:
        started.append(dict(positions))
        original(session, cluster_id, positions, *args, **kwargs)

    monkeypatch.setattr(store_txnlog, "write_batch", counted)
    reader = Steady(log, {}, random.Random(0), served, [0])
    reader.per_partition = 6  # a busy log: 12 records a read
    clock = [1_000.0]  # steps of 1/8 s, exact in binary: 2 steps are the busy interval, 8 a second

    def step() -> None:
        clock[0] += 0.125
        tail.step()
        assert tail.wait_committed()

    tail = ClusterTail("c", "h", lambda p: reader, sessions, LatestState(["c"]), clock=lambda: clock[0],
                       read_timeout_ms=0, commit_every_s=1.0, commit_busy_s=0.25, commit_busy_records=20)
    tail.step()  # the first batch commits at once (the periodic check waits for it)
    assert tail.wait_committed() and len(started) == 1
    step()
    step()  # 24 records, 1/8 s after the first of them
    assert len(started) == 1
    step()  # 36 records, the busy interval after the first: committed
    assert len(started) == 2
    reader.per_partition = 1  # now a trickle: 2 records a read, that never drains
    for _ in range(8):
        step()  # 2 .. 16 records over 7/8 s: the busy interval passes with fewer than 20 waiting
    assert len(started) == 2
    step()  # a second after the first of them
    assert len(started) == 3
    assert started[-1] == {p: max(r.offset + 1 for r in served if r.log_partition == p) for p in log}
    tail.close()
    positions, rows = _stored(sessions)
    assert rows == [(r.log_partition, r.offset) for r in served]
    assert _consistent(positions, rows)
