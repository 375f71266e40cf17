"""The tail's atomic bookkeeping: positions and what was derived from them commit together.

A fake log (the Kafka boundary) and real databases: writes fail at random points, the
tail reloads from what was committed, and the end result must equal applying every
record exactly once.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.collect.txnlog_tail import ClusterTail, cluster_id_for
from txnwatch.core import vocabulary as v
from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord, TxnState
from txnwatch.core.views import LatestState
from txnwatch.detect import txnlog as d
from txnwatch.store import models as m
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store import txnlog_models as t
from txnwatch.store import txnlog_progress
from txnwatch.store.clusters import register_clusters
from txnwatch.store.db import make_sessionmaker

E, ON, PC, CC, PA, CA = (TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT,
                         TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)


def registered(engine: Engine) -> sessionmaker[Session]:
    """A session factory over the database with cluster "c" registered, as the store does at start."""
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        register_clusters(session, {"c": "h:9092"}, datetime.now(UTC))
    return sessions


def the_log(ids: int = 6, transactions: int = 25) -> dict[int, list[TxnLogRecord]]:
    """TV2 producers on two coordinator partitions: commits, every fifth an abort, one fence each at the end."""
    log: dict[int, list[TxnLogRecord]] = {0: [], 1: []}
    for n in range(ids):
        tid, part = f"app-{n}", n % 2
        records = log[part]

        def add(state: TxnState, epoch: int, at: int, start: int | None, tid: str = tid, part: int = part,
                records: list[TxnLogRecord] = records, pid: int = 100 + n) -> None:
            records.append(TxnLogRecord(tid, part, len(records), at, TxnLogKind.VALUE, state, None, pid, epoch,
                                        10_000, (("o", 0),) if state in (ON, PC, PA) else (), at, start, None, None,
                                        2))

        add(E, 0, 1_000, None)
        epoch, at = 0, 1_000
        for i in range(transactions):
            at += 100
            add(ON, epoch, at, at)
            end = (PA, CA) if i % 5 == 4 else (PC, CC)
            add(end[0], epoch + 1, at + 5, at)
            add(end[1], epoch + 1, at + 6, at)
            epoch += 1
        add(ON, epoch, at + 200, at + 200)
        add(PA, epoch + 1, at + 250, at + 200)
        add(CA, epoch + 1, at + 260, at + 200)
        add(E, epoch + 2, at + 300, None)
    return log


class FakeTail:
    def __init__(self, log: Mapping[int, list[TxnLogRecord]], positions: Mapping[int, int], rng: random.Random) -> None:
        self._log, self._next, self._rng = log, {p: positions.get(p, 0) for p in log}, rng

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
        out: list[TxnLogRecord] = []
        for p, records in sorted(self._log.items()):
            take = records[self._next[p]:self._next[p] + self._rng.randint(0, 9)]
            out.extend(take)
            self._next[p] += len(take)
        return out, []

    def positions(self) -> dict[int, int]:
        return dict(self._next)

    def end_offsets(self) -> dict[int, int]:
        return {p: len(r) for p, r in self._log.items()}

    def close(self) -> None:
        pass


class FlakyCommits:
    """Transactions on ``engine`` that sometimes fail just before they would commit: the engine's commit event, so
    the tail's writer fails alike through a Core connection or a Session."""

    def __init__(self, engine: Engine, rng: random.Random, failure_rate: float) -> None:
        self._engine, self._rng, self._rate = engine, rng, failure_rate
        self.failures = 0
        event.listen(engine, "commit", self._commit)

    def _commit(self, connection: Any) -> None:
        if self._rng.random() < self._rate:
            self.failures += 1
            raise OSError("connection lost before commit")

    def close(self) -> None:
        event.remove(self._engine, "commit", self._commit)


@pytest.mark.parametrize(("seed", "tick_s"), [(7, 10.0), (11, 0.25)])  # a commit per fetch; several per commit
def test_failed_writes_neither_lose_nor_double_count(engine: Engine, seed: int, tick_s: float) -> None:
    rng = random.Random(seed)
    log = the_log()
    sessions = registered(engine)
    flaky = FlakyCommits(engine, rng, failure_rate=0.3)
    clock = [1_000.0]
    tail = ClusterTail("c", "h:9092", lambda positions: FakeTail(log, positions, rng), sessions,
                       LatestState(["c"]), clock=lambda: clock[0], read_timeout_ms=0)
    ends = {p: len(r) for p, r in log.items()}
    for _ in range(5_000):
        tail.step()
        clock[0] += tick_s
        with sessions() as session:
            cid = cluster_id_for(sessions, "c")
            if store_txnlog.load(session, cid).positions == ends:
                break
    flaky.close()
    assert flaky.failures > 0
    _, expected = d.apply(d.TxnLogState(), [r for p in sorted(log) for r in log[p]])
    with sessions() as session:
        resumed = store_txnlog.load(session, cid)
        X = m.TransactionTransition
        stream = (X.cluster_id == cid, X.source == m.TRANSACTION_LOG, X.anomaly.is_(None))
        staged = session.scalar(select(func.count()).select_from(X).where(*stream))
        offsets = set(session.execute(select(X.log_partition, X.log_offset).where(*stream)).all())
        aggregated = session.execute(select(func.sum(t.TxnLogAggregate.commits),
                                            func.sum(t.TxnLogAggregate.fences))
                                     .where(t.TxnLogAggregate.cluster_id == cid)).one()
    assert resumed.positions == ends
    assert Counter(resumed.counters) == Counter({k: v for k, v in expected.counts.items() if v})
    assert resumed.counters["commit"] == 6 * 20 and resumed.counters["fenced"] == 6
    assert staged == sum(ends.values()) == len(offsets)  # every record staged once
    assert tuple(aggregated) == (6 * 20, 6)
    replayed, _ = d.apply(d.TxnLogState(), [r for p in sorted(log) for r in log[p]])
    assert dict(resumed.state.ids) == dict(replayed.ids)  # every field round-trips through the database
    state = resumed.state.ids["app-3"]
    assert (state.state, state.commits, state.aborts, state.fences) == (E, 20, 6, 1)


def test_fetches_within_a_second_commit_once_with_one_row_per_id(engine: Engine,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """One id touched hundreds of times between two commits is written once, with positions in the same commit."""
    sessions = registered(engine)
    log = {0: the_log(ids=1, transactions=100)[0]}
    writes: list[tuple[int, int, dict[int, int]]] = []
    original = store_txnlog.write_batch

    def counted(session: Session, cluster_id: int, positions: Mapping[int, int], findings: d.TxnLogFindings,
                *args: Any, **kwargs: Any) -> None:
        writes.append((len(findings.changed), len(findings.transitions), dict(positions)))
        original(session, cluster_id, positions, findings, *args, **kwargs)

    monkeypatch.setattr(store_txnlog, "write_batch", counted)

    class Steady(FakeTail):
        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
            take = self._log[0][self._next[0]:self._next[0] + 7]
            self._next[0] += len(take)
            return take, []

    clock = [1_000.0]
    tail = ClusterTail("c", "h", lambda p: Steady(log, p, random.Random(0)), sessions, LatestState(["c"]),
                       clock=lambda: clock[0], read_timeout_ms=0)
    for _ in range(30):
        tail.step()  # the clock stands still: after the first batch (the periodic check), nothing commits
    assert len(writes) == 1
    with sessions() as session:
        assert store_txnlog.load(session, cluster_id_for(sessions, "c")).positions == {0: 7}
    clock[0] += 1.0
    tail.step()  # a second later everything applied so far commits at once, as one row for the one id
    assert tail.wait_committed()  # the commit runs on the writer thread
    assert len(writes) == 2 and writes[1][:2] == (1, 31 * 7 - 7) and writes[1][2] == {0: 31 * 7}
    while tail.step():
        pass  # ...and when the log is drained, the rest commits at the next empty read
    assert writes[-1][2] == {0: len(log[0])} and all(changed == 1 for changed, _, _ in writes)
    with sessions() as session:
        resumed = store_txnlog.load(session, cluster_id_for(sessions, "c"))
    replayed, found = d.apply(d.TxnLogState(), log[0])
    assert dict(resumed.state.ids) == dict(replayed.ids)
    assert Counter(resumed.counters) == Counter({k: v for k, v in found.counts.items() if v})


def test_an_idle_tail_leaves_the_generation_alone_and_a_commit_moves_it(engine: Engine) -> None:
    """An idle tail publishes its history view after every empty read (twice a second in the daemon).  Each move of
    the state's generation drops every answer the API keeps (serve/answer_cache.py), so an unchanged view must not
    move it; a committed batch must, since the cached answers read its rows (issue 25)."""
    sessions = registered(engine)
    log = {0: the_log(ids=1, transactions=3)[0]}
    written = [0]  # how much of the log the fake cluster holds so far

    class Growing(FakeTail):
        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
            take = self._log[0][self._next[0]:written[0]]
            self._next[0] += len(take)
            return take, []

        def end_offsets(self) -> dict[int, int]:
            return {0: written[0]}

    clock = [1_000.0]
    state = LatestState(["c"])
    tail = ClusterTail("c", "h", lambda p: Growing(log, p, random.Random(0)), sessions, state,
                       clock=lambda: clock[0], read_timeout_ms=0)
    tail.step()  # opens, reads nothing, checks the log's end: exact mode published
    view = state.get("c")
    assert view is not None and view.history.mode == "exact"
    idle = state.generation
    for _ in range(16):  # 4 s of empty reads, short of the next periodic check (CHECK_EVERY_S)
        clock[0] += 0.25
        tail.step()
    assert state.generation == idle
    written[0] = 5
    clock[0] += 0.25
    assert tail.step() == 5  # applied, not yet committed
    assert state.generation == idle
    clock[0] += 0.25
    tail.step()  # the log is drained: the batch commits and the view says so
    assert state.generation > idle
    view = state.get("c")
    assert view is not None and view.history.last_record_at_ms == max(r.at_ms for r in log[0][:5])


def test_resume_carries_classification_across_a_restart(engine: Engine) -> None:
    """Stopping between a TV2 abort and the InitProducerId that proves the fence must still count the fence."""
    sessions = registered(engine)
    log = {0: the_log(ids=1, transactions=2)[0]}
    cut = len(log[0]) - 1  # everything but the fencing instance's Empty
    first = ClusterTail("c", "h", lambda p: FakeTail({0: log[0][:cut]}, p, random.Random(0)), sessions,
                        LatestState(["c"]), read_timeout_ms=0)
    for _ in range(50):
        first.step()
    second = ClusterTail("c", "h", lambda p: FakeTail(log, p, random.Random(0)), sessions, LatestState(["c"]),
                         read_timeout_ms=0)
    for _ in range(50):
        second.step()
    with sessions() as session:
        counters: dict[str, Any] = store_txnlog.load(session, cluster_id_for(sessions, "c")).counters
    assert counters["fenced"] == 1 and counters["commit"] == 2


def test_stream_goes_to_the_archive_and_the_timeline_still_shows_it(engine: Engine, tmp_path: Any) -> None:
    from datetime import timedelta

    from txnwatch.store.archive import export_transitions_then_purge
    from txnwatch.store.txnlog_queries import timeline

    sessions = registered(engine)
    log = the_log(ids=2, transactions=3)
    tail = ClusterTail("c", "h", lambda p: FakeTail(log, p, random.Random(3)), sessions, LatestState(["c"]),
                       read_timeout_ms=0)
    for _ in range(60):
        tail.step()
    cid = cluster_id_for(sessions, "c")
    with sessions() as session:
        hot = timeline(session, cid, "c", "app-1", 100, str(tmp_path))
    purged = export_transitions_then_purge(engine, sessions, str(tmp_path), hot=timedelta(0), settle=timedelta(0))
    assert purged == sum(len(r) for r in log.values())
    with sessions() as session:
        X = m.TransactionTransition
        assert session.scalar(select(func.count()).select_from(X).where(X.anomaly.is_(None))) == 0
        archived = timeline(session, cid, "c", "app-1", 100, str(tmp_path))
    assert len(hot) == len(log[1]) and archived == hot
    assert archived[0].to_state == "Empty" and "fenced" in archived[0].events


def test_archive_retention_drops_old_days_from_the_manifest_and_the_disk(engine: Engine, tmp_path: Any) -> None:
    from datetime import timedelta

    from txnwatch.store.archive import export_transitions_then_purge, open_archive, prune_archive, read_manifest

    sessions = registered(engine)
    tail = ClusterTail("c", "h", lambda p: FakeTail(the_log(ids=1, transactions=2), p, random.Random(3)), sessions,
                       LatestState(["c"]), read_timeout_ms=0)
    for _ in range(30):
        tail.step()
    export_transitions_then_purge(engine, sessions, str(tmp_path), hot=timedelta(0), settle=timedelta(0))
    fs, root = open_archive(str(tmp_path))
    files = list(read_manifest(fs, root).table("transitions").files)
    assert files and all("date=1970-01-01" in f for f in files)  # the synthetic log's coordinator times
    assert prune_archive(str(tmp_path), keep_days=30) == len(files)
    assert read_manifest(fs, root).table("transitions").files == {}
    assert not list(tmp_path.rglob("*.parquet"))


def test_a_batch_over_the_decompression_budget_falls_back_to_polling_with_the_reason_and_is_not_retried_hot(
        engine: Engine) -> None:
    """kafka-python's poll() raises OverBudget at such a batch, every time (txnwatch.kafka.decompress)."""
    from txnwatch.kafka.decompress import GZIP, OverBudget

    opened: list[float] = []
    clock = [1_000.0]

    class Bomb(FakeTail):
        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
            raise OverBudget(GZIP, 32 * 1024 * 1024)

    def open_tail(positions: Mapping[int, int]) -> Bomb:
        opened.append(clock[0])
        return Bomb({0: []}, positions, random.Random(0))

    state = LatestState(["c"])
    tail = ClusterTail("c", "h", open_tail, registered(engine), state, clock=lambda: clock[0], read_timeout_ms=0,
                       retry_s=30.0)
    for _ in range(50):
        tail.step()
        clock[0] += 0.1
    view = state.get("c")
    assert view is not None and view.history is not None
    assert view.history.mode == "polling"
    assert view.history.reason == ("lost the transaction log: OverBudget: gzip batch decompresses to more than "
                                   "32 MiB, the budget for one record batch")
    assert opened == [1_000.0]  # 5 s of steps: the log is tried again only after retry_s
    clock[0] += 30.0
    tail.step()
    assert len(opened) == 2


def test_a_commit_writes_only_the_positions_that_moved_and_the_stored_ones_stay_whole(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: every commit upserted all of the log's positions (50 partitions, every second on a busy
    cluster); now only the partitions read since the last commit.  After a restart the stored positions are
    still every partition's, and the tail resumes exactly there."""
    sessions = registered(engine)
    log = the_log(ids=4, transactions=5)
    written: list[dict[int, int]] = []
    original = store_txnlog.write_batch

    def spied(session: Session, cluster_id: int, positions: Mapping[int, int], *args: Any, **kwargs: Any) -> None:
        written.append(dict(positions))
        original(session, cluster_id, positions, *args, **kwargs)

    monkeypatch.setattr(store_txnlog, "write_batch", spied)

    class OnePartitionAtATime(FakeTail):
        """Reads partition 0 to its end first, then partition 1."""

        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
            for p in sorted(self._log):
                if self._next[p] < len(self._log[p]):
                    take = self._log[p][self._next[p]:self._next[p] + 5]
                    self._next[p] += len(take)
                    return take, []
            return [], []

    clock = [1_000.0]

    def run() -> None:
        tail = ClusterTail("c", "h", lambda p: OnePartitionAtATime(log, p, random.Random(0)), sessions,
                           LatestState(["c"]), clock=lambda: clock[0], read_timeout_ms=0)
        for _ in range(200):
            tail.step()
            clock[0] += 2.0  # every step commits
        tail.close()

    run()
    moved = [w for w in written if w]
    assert moved[0] == {0: 5, 1: 0}  # the first commit: every position (the database held none)
    done = next(i for i, w in enumerate(moved) if w.get(0) == len(log[0]))
    assert all(list(w) == [0] for w in moved[1:done])  # while partition 0 is read, only its position is written
    assert moved[done + 1:] and all(list(w) == [1] for w in moved[done + 1:])  # then partition 1's alone
    ends = {p: len(r) for p, r in log.items()}
    with sessions() as session:
        assert store_txnlog.load(session, cluster_id_for(sessions, "c")).positions == ends
    written.clear()
    run()  # a restart resumes at the stored positions: nothing left to read, nothing written
    assert not any(written)


def test_commits_reuse_their_upserts_and_still_add_up(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25: the position, counter and aggregate upserts were built anew at every commit (about a seventh of
    the tail thread's CPU).  They are built once per dialect (on PostgreSQL; SQLite binds plain tuples); the
    counters still add up, the aggregate keeps the larger maximum and the positions take the newest value across
    commits."""
    sessions = registered(engine)
    cid = cluster_id_for(sessions, "c")
    built: list[str] = []
    original = txnlog_progress.insert_for

    def counted(dialect: str, table: Any) -> Any:
        built.append(table.name)
        return original(dialect, table)

    monkeypatch.setattr(txnlog_progress, "insert_for", counted)
    for cached in (txnlog_progress._position_upsert, txnlog_progress._counter_upsert,
                   txnlog_progress._aggregate_upsert):
        cached.cache_clear()
    minute = 60_000
    for n, (offset, longest) in enumerate([(10, 40), (25, 90), (31, 7)]):
        findings = d.TxnLogFindings(counts={v.COMMIT: 2, v.ABORT: n},
                                    buckets={minute: {v.COMMIT: 2, "duration_ms_sum": longest, "duration_count": 1,
                                                      "duration_ms_max": longest}})
        with sessions.begin() as session:
            store_txnlog.write_batch(session, cid, {3: offset, 4: offset + 1}, findings)
    # once each, not once per commit; SQLite writes them as plain tuples and builds none (test_txnlog_upserts.py)
    assert sorted(built) == ([] if engine.dialect.name == "sqlite" else sorted(
        {t.TxnLogPosition.__tablename__, t.TxnLogCounter.__tablename__, t.TxnLogAggregate.__tablename__}))
    with sessions() as session:
        resumed = store_txnlog.load(session, cid)
        aggregate = session.execute(select(t.TxnLogAggregate.commits, t.TxnLogAggregate.duration_ms_sum,
                                           t.TxnLogAggregate.duration_ms_max, t.TxnLogAggregate.duration_count)
                                    .where(t.TxnLogAggregate.cluster_id == cid)).one()
    assert resumed.positions == {3: 31, 4: 32}
    assert resumed.counters[v.COMMIT] == 6 and resumed.counters[v.ABORT] == 3
    assert tuple(aggregate) == (6, 137, 90, 3)


def test_an_idle_tail_reads_with_the_long_wait_and_applied_records_with_the_short_one(engine: Engine) -> None:
    """Nothing applied or in flight: the read waits IDLE_READ_FACTOR times longer (fewer empty steps, issue 25);
    records applied, or their commit not yet collected: the short wait, so the empty read that commits or publishes
    them comes as soon as before."""
    sessions = registered(engine)
    log = {0: the_log(ids=1, transactions=2)[0]}
    waits: list[int] = []
    arriving = [0]  # records the fake cluster hands over at the next read

    class Recording(FakeTail):
        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
            waits.append(timeout_ms)
            take = self._log[0][self._next[0]:self._next[0] + arriving[0]]
            self._next[0] += len(take)
            arriving[0] = 0
            return take, []

    tail = ClusterTail("c", "h", lambda p: Recording(log, p, random.Random(0)), sessions, LatestState(["c"]),
                       read_timeout_ms=500)
    tail.step()  # opens the tail: nothing applied, the long wait
    arriving[0] = 3
    tail.step()  # still nothing applied when the read starts: the long wait, and it brings 3 records
    tail.step()  # they wait for their commit: the short wait; it comes back empty, so they commit
    tail.step()  # committed and collected: idle again
    assert waits == [2_000, 2_000, 500, 2_000]
    with sessions() as session:
        assert store_txnlog.load(session, cluster_id_for(sessions, "c")).positions == {0: 3}
    explicit = ClusterTail("c", "h", lambda p: Recording(log, p, random.Random(0)), sessions, LatestState(["c"]),
                           read_timeout_ms=500, idle_read_timeout_ms=700)
    explicit.step()
    assert waits[-1] == 700
    tail.close()
    explicit.close()
