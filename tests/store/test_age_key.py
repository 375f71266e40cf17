"""txn_states.age_key, computed by the database, is the Python sort key of every row, and the list walks it.

The column's expression is written twice (the model, and migration 0006 per backend); these tests read back
what each backend computed for every state, with and without a start time, and page through the list in
both age orders with the keyset cursor, against the order Python computes from the rows themselves.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

from sqlalchemy import Engine, insert, select

from txnwatch.core.model import TxnState
from txnwatch.store import models as m
from txnwatch.store import queries
from txnwatch.store.db import make_sessionmaker

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def _seed(engine: Engine, count: int = 120) -> None:
    rnd = random.Random(11)
    starts = [NOW - timedelta(seconds=rnd.randrange(0, 900), microseconds=rnd.randrange(1_000_000)) for _ in range(8)]
    with engine.begin() as conn:
        cluster_id = conn.execute(insert(m.Cluster).returning(m.Cluster.id), [dict(
            name="c", bootstrap_servers="h:9092", up=True, created_at=NOW)]).scalar_one()
        conn.execute(insert(m.TransactionState), [dict(
            cluster_id=cluster_id, transactional_id=f"t-{i:03d}", coordinator_id=0,
            state=rnd.choice(list(TxnState)).value, producer_id=i, producer_epoch=0, timeout_ms=60_000,
            # few distinct start times: ties on the key, broken by id across page boundaries
            txn_started_at=None if i % 7 == 0 else rnd.choice(starts), partitions=[],
            first_seen_at=NOW, last_seen_at=NOW, gone_at=None) for i in range(count)])


def test_age_key_is_the_python_sort_key_for_every_state(engine: Engine) -> None:
    _seed(engine)
    sessions = make_sessionmaker(engine)
    with sessions() as session:
        rows = session.execute(select(m.TransactionState.__table__)).all()
    assert {r.state for r in rows} == {s.value for s in TxnState}
    mismatched = [(r.transactional_id, r.state, r.txn_started_at, r.age_key) for r in rows
                  if r.age_key != queries.txn_sort_key(r, queries.TxnSort.AGE)[0]]
    assert mismatched == []
    assert any(r.age_key == queries.NO_AGE for r in rows) and any(r.age_key != queries.NO_AGE for r in rows)


def test_pages_in_age_order_follow_the_python_order(engine: Engine) -> None:
    _seed(engine)
    sessions = make_sessionmaker(engine)
    with sessions() as session:
        everything = session.execute(select(m.TransactionState.__table__)).all()
        for descending in (True, False):
            # "desc" (the default) is oldest first: ascending start time, transactions without an age last.
            expected = sorted(everything, key=lambda r: queries.txn_sort_key(r, queries.TxnSort.AGE),
                              reverse=not descending)
            walked: list[str] = []
            after = None
            while True:
                page = queries.list_transactions(session, queries.TxnFilter(clusters=("c",)),
                                                 sort=queries.TxnSort.AGE, descending=descending, after=after,
                                                 limit=17, now=NOW)
                walked += [r.txn.transactional_id for r in page]
                if len(page) < 17:
                    break
                after = queries.txn_sort_key(page[-1].txn, queries.TxnSort.AGE)
            assert walked == [r.transactional_id for r in expected]


def test_min_age_filter_keeps_open_transactions_old_enough(engine: Engine) -> None:
    _seed(engine)
    sessions = make_sessionmaker(engine)
    with sessions() as session:
        everything = session.execute(select(m.TransactionState.__table__)).all()
        found = queries.list_transactions(session, queries.TxnFilter(clusters=("c",), min_age_seconds=300),
                                          sort=queries.TxnSort.AGE, descending=True, after=None, limit=500, now=NOW)
    # Kafka's open states, spelled here rather than taken from the queries under test.
    open_states = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}
    expected = {r.transactional_id for r in everything if r.state in open_states
                and r.txn_started_at is not None and r.txn_started_at <= NOW - timedelta(seconds=300)}
    assert expected and {r.txn.transactional_id for r in found} == expected
