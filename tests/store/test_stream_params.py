"""The compiled parameters of the stream rows' INSERTs on SQLite (``store/_stream_params.c``) give what
``stream_rows`` gives: the same values, in the same order, stored as the same rows of the same types."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import Engine, text

from txnwatch.core import vocabulary as v
from txnwatch.core.findings import Transition
from txnwatch.store import models as m
from txnwatch.store import txnlog as store_txnlog

from .test_txnlog_tail import registered

PARAMS = store_txnlog.STREAM_PARAMS


def test_this_install_has_the_compiled_stream_params() -> None:
    """setup.py builds it where a C compiler is (bootstrap installs one): without it the tail's writer spends ~1.2x
    the CPU a record and says so only once in its log."""
    assert PARAMS is not None, store_txnlog.STREAM_PARAMS_MISSING
    from txnwatch.store import _stream_params

    assert _stream_params.FIELDS == len(store_txnlog.STREAM_COLUMNS) - 3 == len(Transition._fields) - 1
    assert len(Transition._fields) == _stream_params.WIDTH and Transition._fields[-1] == "source"


needs_params = pytest.mark.skipif(PARAMS is None, reason="no compiled stream params in this install (the test above fails)")

_text = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
_maybe_int = st.none() | st.integers(-2**63, 2**63 - 1)
_partitions = st.lists(st.tuples(st.sampled_from(["t", "orders", "é-ü", "a,b"]), st.integers(0, 2**31 - 1)),
                       max_size=4).map(tuple)
_events = st.lists(st.sampled_from([v.COMMIT, v.ABORT, v.EPOCH_BUMP, v.FENCED, "ünknown", ""]), max_size=3).map(tuple)
transitions = st.builds(
    Transition, _text, st.integers(0, 2**62), st.integers(0, 49), st.integers(0, 2**62), st.none() | _text,
    _text, st.integers(-1, 2**62), st.integers(-1, 32767), _maybe_int, _maybe_int, st.integers(0, 2**31 - 1),
    _maybe_int, _partitions, _events, _maybe_int, st.integers(0, 2), st.none() | _text, st.sampled_from(v.TransitionSource))


def _expected(head: tuple[Any, ...], xs: list[Transition], start: int, stop: int) -> tuple[Any, ...]:
    """What the Python path binds for these rows: stream_rows' values after its three constant columns."""
    rows = store_txnlog.stream_rows(-1, -1, xs[start:stop])
    return head + tuple(v for row in rows for v in row[3:])


@needs_params
@settings(max_examples=200, deadline=None)
@given(st.lists(transitions, max_size=40), st.data())
def test_the_compiled_params_are_stream_rows_values(xs: list[Transition], data: st.DataObject) -> None:
    assert PARAMS is not None
    start = data.draw(st.integers(0, len(xs) // 2))
    stop = data.draw(st.integers(start, len(xs)))
    head = (7, 1_800_000_000_000)
    store_txnlog._joined_partitions.clear()  # misses (join) and hits (the cache) both
    got = PARAMS(head, xs, start, stop, store_txnlog._joined_partitions, store_txnlog._partitions_text)
    assert got == _expected(head, xs, start, stop)
    assert [type(v) for v in got] == [type(v) for v in _expected(head, xs, start, stop)]
    assert PARAMS(head, tuple(xs), start, stop, {}, store_txnlog._partitions_text) == got  # a tuple as a list


@needs_params
def test_the_compiled_params_use_the_cache_and_call_join_only_on_a_miss() -> None:
    assert PARAMS is not None
    x = Transition("a", 1, 0, 0, None, "Ongoing", 1, 0, None, None, 60_000, None, (("t", 0), ("t", 1)), (), None,
                   2, None, v.TransitionSource.TRANSACTION_LOG)
    joined: dict[Any, str] = {x.partitions: "cached"}
    calls: list[Any] = []

    def join(partitions: Any) -> str:
        calls.append(partitions)
        return "joined"

    assert PARAMS((), [x], 0, 1, joined, join)[12] == "cached" and calls == []
    assert PARAMS((), [x], 0, 1, {}, join)[12] == "joined" and calls == [x.partitions]


@needs_params
@pytest.mark.parametrize(("transitions", "start", "stop", "error"), [
    ([("a",) * 17], 0, 1, TypeError),  # the stored fields without the source: not a Transition's width
    (["not a tuple"], 0, 1, TypeError),
    ([], 0, 1, IndexError),
    ([], -1, 0, IndexError),
    (None, 0, 0, TypeError),
])
def test_the_compiled_params_refuse_what_is_not_transitions(transitions: Any, start: int, stop: int,
                                                            error: type[Exception]) -> None:
    assert PARAMS is not None
    with pytest.raises(error):
        PARAMS((), transitions, start, stop, {}, store_txnlog._partitions_text)


@needs_params
def test_a_failing_join_or_bad_events_raise_and_leak_nothing() -> None:
    assert PARAMS is not None
    x = Transition("a", 1, 0, 0, None, "Ongoing", 1, 0, None, None, 60_000, None, (("t", 0),), (), None, 2, None,
                   v.TransitionSource.TRANSACTION_LOG)

    def join(partitions: Any) -> str:
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        PARAMS((1, 2), [x, x], 0, 2, {}, join)
    with pytest.raises(TypeError):
        not_str = x._replace(events=(1, 2))  # type: ignore[arg-type]  # events that are not str
        PARAMS((1, 2), [not_str], 0, 1, {x.partitions: "t-0"}, join)


def _variety(n: int) -> list[Transition]:
    """Transitions whose fields take every kind of value in turn (NULLs, quotes, non-ASCII, empty and long lists)."""
    partitions = [(), (("t", 0),), (("orders", 3), ("é-ü", 2**31 - 1)), (("t", 0),)]
    events = [(), (v.COMMIT,), (v.EPOCH_BUMP, v.FENCED), ("",)]
    return [Transition(
        f"app-'é'-{i % 5}", 1_800_000_000_000 + i, i % 3, i, None if i % 4 == 0 else "Ongoing", "PrepareCommit",
        2**40 + i, i % 32767, None if i % 2 else 2**41, None if i % 2 else 3, 60_000, None if i % 7 == 0 else 5,
        partitions[i % 4], events[i % 4], None if i % 3 else i * 3, i % 3, None if i % 6 == 5 else f"detail {i}, with ' quote",
        v.TransitionSource.TRANSACTION_LOG)
        for i in range(n)]


@needs_params
@pytest.mark.parametrize("per_statement", [1, 3, 64])
def test_staging_with_the_compiled_params_stores_the_rows_stream_rows_stores(
        sqlite_engine: Engine, per_statement: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same transitions staged both ways, into one table: the same values and types, in the same id order."""
    monkeypatch.setattr(store_txnlog, "_MAX_ROWS_PER_INSERT", per_statement)
    sessions = registered(sqlite_engine)
    xs = _variety(23)
    with sessions.begin() as session:
        cid = session.execute(text("SELECT id FROM clusters")).scalar_one()
    with sqlite_engine.begin() as connection:
        store_txnlog.stage_transitions_of(connection, cid, 1_800_000_000_500, xs)
    monkeypatch.setattr(store_txnlog, "STREAM_PARAMS", None)
    with sqlite_engine.begin() as connection:
        store_txnlog.stage_transitions_of(connection, cid, 1_800_000_000_500, xs)
    columns = ", ".join(store_txnlog.STREAM_COLUMNS)
    kinds = ", ".join(f"typeof({c})" for c in store_txnlog.STREAM_COLUMNS)
    with sqlite_engine.connect() as connection:
        stored = [tuple(r) for r in connection.execute(text(
            f"SELECT {columns}, {kinds} FROM {m.TransactionTransition.__tablename__} ORDER BY id"))]
    assert len(stored) == 2 * len(xs)
    assert stored[:len(xs)] == stored[len(xs):]
    assert [r[:len(store_txnlog.STREAM_COLUMNS)] for r in stored[len(xs):]] == [
        tuple(row) for row in store_txnlog.stream_rows(cid, 1_800_000_000_500, xs)]
