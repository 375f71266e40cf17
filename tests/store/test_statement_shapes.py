"""store/statement_shapes.py: SQLite's multi-row INSERTs take a few row counts, so each connection keeps a few
prepared statements (issue 25: one per batch size held 8-15 MB on the peers lab)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text

from txnwatch.store import models as m
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store.statement_shapes import chunk_sizes, largest_shape

from .test_txnlog_insert_many import _rows
from .test_txnlog_tail import registered


@pytest.mark.parametrize(("rows", "largest", "sizes"), [
    (0, 64, []), (1, 64, [1]), (63, 64, [32, 16, 8, 4, 2, 1]), (64, 64, [64]), (150, 64, [64, 64, 16, 4, 2]),
    (7, 2, [2, 2, 2, 1]), (5, 1, [1, 1, 1, 1, 1]),
])
def test_a_batch_is_cut_into_full_statements_then_its_binary_digits(rows: int, largest: int, sizes: list[int]) -> None:
    assert chunk_sizes(rows, largest) == sizes


def test_every_batch_size_uses_the_same_few_shapes() -> None:
    shapes: set[int] = set()
    for n in range(1_000):
        sizes = chunk_sizes(n, 64)
        assert sum(sizes) == n
        shapes.update(sizes)
    assert sorted(shapes) == [1, 2, 4, 8, 16, 32, 64]


def test_the_largest_shape_is_a_power_of_two_within_the_limit() -> None:
    assert [largest_shape(n) for n in (0, 1, 2, 3, 49, 64, 1_638)] == [1, 1, 2, 2, 32, 64, 1_024]
    with pytest.raises(ValueError, match="power of two"):
        chunk_sizes(10, 3)


def test_the_tail_s_inserts_prepare_a_few_statements_whatever_the_batch_sizes(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("multi-row INSERTs are SQLite's path (PostgreSQL's is COPY)")
    sessions = registered(engine)
    statements: list[str] = []
    batches = [1, 2, 3, 5, 17, 40, 63, 64, 65, 100, 129]
    with sessions.begin() as session:
        cid = session.execute(text("SELECT id FROM clusters")).scalar_one()
        dbapi: Any = session.connection().connection.driver_connection
        dbapi.set_trace_callback(statements.append)
        first = 0
        for n in batches:
            store_txnlog._insert_many(session, store_txnlog.STREAM_COLUMNS, _rows(cid, first, n))
            first += n
        dbapi.set_trace_callback(None)
    # The expanded SQL of each INSERT: one "(..)" per row, none of the test's values holds "), (".
    counts = [s.split(" VALUES ", 1)[1].count("), (") + 1 for s in statements if s.startswith("INSERT INTO")]
    assert sum(counts) == sum(batches)
    assert set(counts) <= {1, 2, 4, 8, 16, 32, 64} and max(counts) == 64
    with sessions() as session:  # every row stored, in the order given
        offsets = session.scalars(text(f"SELECT log_offset FROM {m.TransactionTransition.__tablename__} ORDER BY id"))
        assert list(offsets) == list(range(sum(batches)))
