"""An id's history is read along its id-prefix index, and answers exactly that id (issue 25).

SQLite uses an expression index only for the same expression: ``substr(transactional_id, ?, ?)`` with bound
bounds is not the index's ``substr(transactional_id, 1, 200)``, and from ``transactional_id = ?`` it propagates
the constant into the prefix term.  Either way the index served the cluster only: the per-id history (the API's
timeline, a group's lag) read every row of the cluster and sorted them.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from tests.store.test_txnlog_tail import registered
from txnwatch.core.vocabulary import FENCED, TxnState
from txnwatch.store import models as m
from txnwatch.store import queries

HEAD = "tenant-" + "x" * 300  # three ids sharing their first 200 characters (the index's head), and a short one
IDS = ("app-1", HEAD, HEAD + "-b", HEAD + "-c")
T0 = 1_700_000_000_000


def _transitions(sessions: sessionmaker[Session]) -> int:
    """Five log rows and two polled rows per id, interleaved across ids, at distinct times; returns the cluster id."""
    with sessions.begin() as session:
        cid = session.query(m.Cluster.id).filter_by(name="c").scalar()
        n = 0
        for step in range(7):
            for tid in IDS:
                n += 1
                source = m.TRANSACTION_LOG if step < 5 else m.POLL
                session.add(m.TransactionTransition(
                    cluster_id=cid, source=source, transactional_id=tid, at_ms=T0 + n, staged_at_ms=T0 + n,
                    to_state=TxnState.ONGOING.value, producer_id=1, producer_epoch=step, timeout_ms=60_000,
                    log_partition=0 if source == m.TRANSACTION_LOG else None,
                    log_offset=n if source == m.TRANSACTION_LOG else None))
        # An anomaly row of the first id: never part of its history.
        session.add(m.TransactionTransition(cluster_id=cid, source=m.TRANSACTION_LOG, anomaly=FENCED,
                                            transactional_id=IDS[0], at_ms=T0 + 999, staged_at_ms=T0 + 999,
                                            to_state=TxnState.ONGOING.value, producer_id=1, producer_epoch=9, timeout_ms=60_000))
    return int(cid)


def test_an_ids_history_is_exactly_its_rows_newest_first(engine: Engine) -> None:
    sessions = registered(engine)
    cid = _transitions(sessions)
    with sessions() as session:
        for tid in IDS:
            rows = queries.transitions(session, cid, tid, limit=100)
            assert [r.transactional_id for r in rows] == [tid] * 7
            assert [r.producer_epoch for r in rows] == [6, 5, 4, 3, 2, 1, 0]  # newest first, the anomaly left out
            assert [r.producer_epoch for r in queries.transitions(session, cid, tid, limit=3)] == [6, 5, 4]
        assert queries.transitions(session, cid, HEAD + "-d", limit=100) == []
        assert queries.transitions(session, cid + 1, IDS[0], limit=100) == []


def _plans(engine: Engine, read: Callable[[Session], Any]) -> list[str]:
    """EXPLAIN QUERY PLAN of every statement ``read`` runs, with its own parameters."""
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            seen.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", capture)
    try:
        with Session(engine) as session:
            read(session)
    finally:
        event.remove(engine, "before_cursor_execute", capture)
    assert seen
    raw = engine.raw_connection()
    try:
        return [" / ".join(str(row[-1]) for row in raw.cursor().execute(f"EXPLAIN QUERY PLAN {sql}", params))
                for sql, params in seen]
    finally:
        raw.close()


def test_sqlite_reads_an_ids_transitions_along_its_prefix_in_index_order(sqlite_engine: Engine) -> None:
    registered(sqlite_engine)
    (plan,) = _plans(sqlite_engine, lambda s: queries.transitions(s, 1, HEAD + "-b", limit=100))
    assert "USING INDEX ix_transitions_txn (cluster_id=? AND <expr>=?)" in plan
    assert "TEMP B-TREE" not in plan  # the index's (at_ms, id) order is the answer's


def test_sqlite_reads_a_groups_lag_along_its_prefix(sqlite_engine: Engine) -> None:
    registered(sqlite_engine)
    since = datetime(2026, 1, 1, tzinfo=UTC) - timedelta(hours=1)
    plans = _plans(sqlite_engine, lambda s: queries.group_lag_history(s, 1, HEAD, since))
    plans += _plans(sqlite_engine, lambda s: queries.group_partitions(s, 1, HEAD))
    assert len(plans) == 2  # group_partitions stops at its first statement when the group has no sample
    for plan in plans:
        assert "USING INDEX ix_lag_samples_lookup (cluster_id=? AND <expr>=?" in plan, plan
