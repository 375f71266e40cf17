"""A transition's detail (NextProducerId's coming rotation, unknown fields) reaches the timeline the API and the
console read."""

from __future__ import annotations

from datetime import timedelta

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


def test_guesses_the_log_covers_are_left_out_and_the_others_stay(engine: Engine) -> None:
    """A restarted daemon's polls guess transitions until its tail reopens; the tail then writes that time's records
    itself, so the guesses between the log's first and last row would show its commits twice."""
    cid = _cluster(engine)
    at = [NOW + timedelta(seconds=s) for s in range(6)]
    with make_sessionmaker(engine).begin() as s:
        s.add_all([_row(cid, m.POLL, at[0]),  # before the tail read anything: only polling saw it
                   _row(cid, m.TRANSACTION_LOG, at[1], offset=10),
                   _row(cid, m.POLL, at[2]),  # the restart's guess, inside the log's rows
                   _row(cid, m.TRANSACTION_LOG, at[3], offset=11),
                   _row(cid, m.TRANSACTION_LOG, at[4], offset=12),
                   _row(cid, m.POLL, at[5])])  # after the log's last row: the tail is not reading now
    with make_sessionmaker(engine)() as s:
        entries = txnlog_queries.timeline(s, cid, "c", "app", 10, None)
        assert [(e.observed_at, e.log_offset) for e in entries] == [
            (at[5], None), (at[4], 12), (at[3], 11), (at[1], 10), (at[0], None)]
        # A page the left-out guess thinned is filled from further back: still the newest three kept rows.
        page = txnlog_queries.timeline(s, cid, "c", "app", 3, None)
        assert [e.log_offset for e in page] == [None, 12, 11]
        page = txnlog_queries.timeline(s, cid, "c", "app", 4, None)
        assert [(e.observed_at, e.log_offset) for e in page] == [(at[5], None), (at[4], 12), (at[3], 11), (at[1], 10)]


def test_without_the_logs_rows_every_guess_stays(engine: Engine) -> None:
    cid = _cluster(engine)
    with make_sessionmaker(engine).begin() as s:
        s.add_all([_row(cid, m.POLL, NOW), _row(cid, m.POLL, NOW + timedelta(seconds=1))])
    with make_sessionmaker(engine)() as s:
        assert [e.log_offset for e in txnlog_queries.timeline(s, cid, "c", "app", 10, None)] == [None, None]
