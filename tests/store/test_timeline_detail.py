"""A transition's detail (NextProducerId's coming rotation, unknown fields) reaches the timeline the API and the
console read."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine

from tests.store.test_one_transition_table import NOW, _cluster, _row
from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.core.findings import Transition
from txnwatch.core.vocabulary import TransitionSource
from txnwatch.store import models as m
from txnwatch.store import txnlog_queries
from txnwatch.store.archive import export_transitions_then_purge
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
        assert [(from_ms(e.at_ms), e.log_offset) for e in entries] == [
            (at[5], None), (at[4], 12), (at[3], 11), (at[1], 10), (at[0], None)]
        assert [e.source for e in entries] == [TransitionSource.POLL, *[TransitionSource.TRANSACTION_LOG] * 3,
                                               TransitionSource.POLL]  # read back from each row's own column
        # A page the left-out guess thinned is filled from further back: still the newest three kept rows.
        page = txnlog_queries.timeline(s, cid, "c", "app", 3, None)
        assert [e.log_offset for e in page] == [None, 12, 11]
        page = txnlog_queries.timeline(s, cid, "c", "app", 4, None)
        assert [(from_ms(e.at_ms), e.log_offset) for e in page] == [(at[5], None), (at[4], 12), (at[3], 11), (at[1], 10)]


def test_without_the_logs_rows_every_guess_stays(engine: Engine) -> None:
    cid = _cluster(engine)
    with make_sessionmaker(engine).begin() as s:
        s.add_all([_row(cid, m.POLL, NOW), _row(cid, m.POLL, NOW + timedelta(seconds=1))])
    with make_sessionmaker(engine)() as s:
        assert [e.log_offset for e in txnlog_queries.timeline(s, cid, "c", "app", 10, None)] == [None, None]


def _started(row: m.TransactionTransition, start: datetime, state: str = "CompleteCommit",
             producer_id: int = 7) -> m.TransactionTransition:
    row.start_ms, row.to_state, row.producer_id = to_ms(start), state, producer_id
    return row


def test_a_guess_of_a_transition_the_log_holds_is_left_out_even_after_its_last_row(engine: Engine) -> None:
    """A restarted daemon polls while its tail reopens; when the producer finished meanwhile, the log's row of the
    last commit lies before the poll that saw it, outside the log's span, and the timeline showed it twice."""
    cid = _cluster(engine)
    at = [NOW + timedelta(seconds=s) for s in range(8)]
    with make_sessionmaker(engine).begin() as s:
        s.add_all([_started(_row(cid, m.TRANSACTION_LOG, at[1], offset=10), at[0]),
                   _started(_row(cid, m.TRANSACTION_LOG, at[3], offset=11), at[2]),
                   _started(_row(cid, m.POLL, at[5]), at[2]),  # the same commit, polled after the log's last row
                   _started(_row(cid, m.POLL, at[6]), at[4]),  # another transaction: only polling saw it
                   _started(_row(cid, m.POLL, at[7]), at[2], producer_id=8),  # another producer id
                   _row(cid, m.POLL, at[7] + timedelta(seconds=1))])  # no start: only the span can tell
    with make_sessionmaker(engine)() as s:
        entries = txnlog_queries.timeline(s, cid, "c", "app", 10, None)
        assert [(from_ms(e.at_ms), e.log_offset, e.producer_id) for e in entries] == [
            (at[7] + timedelta(seconds=1), None, 7), (at[7], None, 8), (at[6], None, 7), (at[3], 11, 7),
            (at[1], 10, 7)]
        # The page is still filled from further back when the left-out guess thinned it.
        assert [e.log_offset for e in txnlog_queries.timeline(s, cid, "c", "app", 4, None)] == [None, None, None, 11]


def test_the_key_names_a_transition_by_state_producer_and_start() -> None:
    entry = Transition(
        transactional_id="app", at_ms=to_ms(NOW), log_partition=None, log_offset=None, from_state="Ongoing",
        to_state="CompleteCommit", producer_id=7, producer_epoch=3, prev_producer_id=7, prev_producer_epoch=2,
        timeout_ms=60_000, start_ms=to_ms(NOW) - 2_000, partitions=(), events=("commit",), duration_ms=None,
        client_transaction_version=None, detail=None, source=TransitionSource.POLL)
    assert txnlog_queries.transition_key(entry) == ("CompleteCommit", 7, to_ms(NOW) - 2_000)
    logged = entry._replace(at_ms=to_ms(NOW) - 1_000, log_partition=3, log_offset=5,
                            source=TransitionSource.TRANSACTION_LOG)
    assert txnlog_queries.without_covered_guesses([entry, logged]) == [logged]  # the log's own row names it
    other = entry._replace(start_ms=None)
    assert txnlog_queries.without_covered_guesses([other, logged]) == [other, logged]


def test_a_transition_read_back_from_the_archive_is_the_one_the_table_held(engine: Engine, tmp_path: Path) -> None:
    """The log's stream leaves the table for the Parquet archive; the timeline then reads it from there as the same
    transitions, field for field (its source from the log position), but for the detail the archive does not keep."""
    cid = _cluster(engine)
    old = NOW - timedelta(hours=2)
    logged = [_started(_row(cid, m.TRANSACTION_LOG, old + timedelta(seconds=i), offset=10 + i), old) for i in range(3)]
    logged[1].detail, logged[2].partitions = "next producer id 8", "orders-0,audit-11"
    with make_sessionmaker(engine).begin() as s:
        s.add_all([*logged, _row(cid, m.POLL, NOW)])
    with make_sessionmaker(engine)() as s:
        before = txnlog_queries.timeline(s, cid, "c", "app", 10, None)
    assert [x.source for x in before] == [TransitionSource.POLL, *[TransitionSource.TRANSACTION_LOG] * 3]
    assert before[1].partitions == (("orders", 0), ("audit", 11))
    archive = str(tmp_path / "archive")
    assert export_transitions_then_purge(engine, make_sessionmaker(engine), archive, hot=timedelta(hours=1),
                                         settle=timedelta(0)) == 3
    with make_sessionmaker(engine)() as s:
        assert txnlog_queries.timeline(s, cid, "c", "app", 10, None) == before[:1]  # only the polled row is left
        after = txnlog_queries.timeline(s, cid, "c", "app", 10, archive)
    assert after == [x._replace(detail=None) for x in before]
