"""A transition's detail (NextProducerId's coming rotation, unknown fields) reaches the timeline the API and the
console read."""

from __future__ import annotations

from sqlalchemy import Engine

from tests.store.test_one_transition_table import NOW, _cluster, _row
from txnwatch.store import models as m
from txnwatch.store import txnlog_queries
from txnwatch.store.db import make_sessionmaker


def test_the_timeline_carries_each_rows_detail(engine: Engine) -> None:
    cid = _cluster(engine)
    rotating = _row(cid, m.TRANSACTION_LOG, NOW, offset=41)
    rotating.detail = "next producer id 8: the id moves to it when this transaction completes"
    with make_sessionmaker(engine).begin() as s:
        s.add_all([rotating, _row(cid, m.TRANSACTION_LOG, NOW, offset=42)])
    with make_sessionmaker(engine)() as s:
        entries = txnlog_queries.timeline(s, cid, "c", "app", 10, None)
    assert [(e.log_offset, e.detail) for e in entries] == [(42, None), (41, rotating.detail)]
