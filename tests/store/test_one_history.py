"""One id-state table (issue 24 item 1): the log's rows and the poll's rows of an id live in ``txn_ids``, and every
reader (list, detail, console, cluster counts) shows the same one: the log's while it speaks, polling's once it has
taken over, with what only polling can say filled in."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, sessionmaker

from tests.store.test_txnlog_tail import FakeTail, registered
from txnwatch.collect.txnlog_tail import ClusterTail, cluster_id_for
from txnwatch.core.model import (
    ClusterSnapshot,
    TopicPartition,
    TransactionDescription,
    TxnLogKind,
    TxnLogRecord,
    TxnState,
)
from txnwatch.core.views import LatestState
from txnwatch.store import models as m
from txnwatch.store import queries
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store.recorder import Recorder

LONG = "tenant-" + "ü" * 16_380  # 32,767 bytes of UTF-8: Kafka's limit
IDS = ("app-1", LONG)
NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
T0 = 1_700_000_000_000


def _committed_log(tids: tuple[str, ...]) -> dict[int, list[TxnLogRecord]]:
    """Each id: Empty, Ongoing, PrepareCommit, CompleteCommit, as a coordinator writes them."""
    log: dict[int, list[TxnLogRecord]] = {0: []}
    for n, tid in enumerate(tids):
        for i, state in enumerate((TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                   TxnState.COMPLETE_COMMIT)):
            at = T0 + n * 1_000 + i * 10
            epoch = 0 if i < 2 else 1
            log[0].append(TxnLogRecord(tid, 0, len(log[0]), at, TxnLogKind.VALUE, state, None, 100 + n, epoch, 60_000,
                                       (("orders", 0),) if state is not TxnState.EMPTY else (), at,
                                       T0 + n * 1_000 + 10 if i else None, None, None, 2))
    return log


def _tail(sessions: sessionmaker[Session], log: dict[int, list[TxnLogRecord]]) -> None:
    tail = ClusterTail("c", "h", lambda p: FakeTail(log, p, random.Random(5)), sessions, LatestState(["c"]),
                       read_timeout_ms=0)
    for _ in range(40):
        tail.step()


def _poll(recorder: Recorder, at_ms: int, state: TxnState) -> None:
    tp = TopicPartition("orders", 0)
    snapshot = ClusterSnapshot(cluster="c", taken_at_ms=at_ms, duration_ms=5, transactions={
        t: TransactionDescription(t, 3, state, 100 + n, 7, 60_000, at_ms - 500, frozenset({tp}))
        for n, t in enumerate(IDS)})
    recorder.on_poll("c", snapshot, None, None, at_ms)
    assert recorder.buffered == 0


def _views(sessions: sessionmaker[Session]) -> dict[str, tuple[str, str, int | None]]:
    """(state, source, coordinator) of each id in the list, checked equal to the detail view of the same id."""
    with sessions() as session:
        cid = cluster_id_for(sessions, "c")
        listed = queries.list_transactions(session, queries.TxnFilter(clusters=("c",)), sort=queries.TxnSort.AGE,
                                           descending=True, after=None, limit=100, now=NOW)
        views = {r.txn.transactional_id: (r.txn.state, r.txn.source, r.txn.coordinator_id) for r in listed}
        assert len(views) == len(listed), "an id listed twice"
        for tid, view in views.items():
            detail = queries.get_transaction(session, cid, tid)
            assert detail is not None and (detail.txn.state, detail.txn.source, detail.txn.coordinator_id) == view
        by_prefix = queries.list_transactions(session, queries.TxnFilter(clusters=("c",), id_prefix=LONG[:300]),
                                              sort=queries.TxnSort.TRANSACTIONAL_ID, descending=False, after=None,
                                              limit=100, now=NOW)
        assert [r.txn.transactional_id for r in by_prefix] == [LONG]
        open_count = queries.cluster_activity(session, cid).open_transactions
    assert open_count == sum(1 for state, _, _ in views.values() if state == "Ongoing")
    return views


def test_the_logs_row_wins_polling_fills_in_and_takes_over_when_the_log_stops(engine: Engine) -> None:
    sessions = registered(engine)
    exact = [True]
    recorder = Recorder(sessions, {"c": "h:9092"}, exact_history=lambda cluster: exact[0])
    recorder.start()
    _poll(recorder, T0 + 60_000, TxnState.ONGOING)  # a poll that landed mid-transaction
    _tail(sessions, _committed_log(IDS))
    # Exact mode: the log's state (the commit it wrote), the coordinator only polling knows.
    assert _views(sessions) == dict.fromkeys(IDS, ("CompleteCommit", m.TRANSACTION_LOG, 3))
    # Polling takes over (the tail stopped being exact): the poll's fresher state shows, everywhere alike.
    exact[0] = False
    _poll(recorder, T0 + 65_000, TxnState.ONGOING)
    assert _views(sessions) == dict.fromkeys(IDS, ("Ongoing", m.POLL, 3))
    # The tail resumes from its own rows, untouched by polling, and writes again: its rows win again.
    with sessions() as session:
        resumed = store_txnlog.load(session, cluster_id_for(sessions, "c"))
    assert {tid: s.state for tid, s in resumed.state.ids.items()} == dict.fromkeys(IDS, TxnState.COMPLETE_COMMIT)
    more = _committed_log(IDS)
    for records in more.values():
        records[:] = [r._replace(offset=r.offset + len(records), producer_epoch=r.producer_epoch + 2)
                      for r in records]
        records[:0] = _committed_log(IDS)[0]
    exact[0] = True
    _tail(sessions, more)
    assert _views(sessions) == dict.fromkeys(IDS, ("CompleteCommit", m.TRANSACTION_LOG, 3))


def test_one_row_per_id_and_source(engine: Engine) -> None:
    sessions = registered(engine)
    recorder = Recorder(sessions, {"c": "h:9092"}, exact_history=lambda cluster: True)
    recorder.start()
    for i in range(3):
        _poll(recorder, T0 + 60_000 + i * 5_000, TxnState.ONGOING)
        _tail(sessions, _committed_log(IDS))
    T = m.TransactionState
    with sessions() as session:
        rows = session.execute(select(T.transactional_id, T.source, T.id_hash)).all()
    assert sorted((tid[:10], source) for tid, source, _ in rows) == sorted(
        (tid[:10], source) for tid in IDS for source in (m.POLL, m.TRANSACTION_LOG))
    assert all(h == m.id_hash(tid) and len(h) == 32 for tid, _, h in rows)
