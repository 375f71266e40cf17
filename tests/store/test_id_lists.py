"""store/id_lists.not_among: the same rows as ``NOT IN (list)``, with one SQL text whatever the list's length."""

from __future__ import annotations

import pytest
from sqlalchemy import Column, Engine, Integer, MetaData, String, Table, select, update
from sqlalchemy.dialects import sqlite

from txnwatch.store.id_lists import not_among

HOSTILE = ["a", 'dq"', "sq'", "back\\slash", "back\\u0041", "é😀", "tab\tnl\n", "\x7f\x01", " sp ", "\u2028",
           "[1]", "null", "x" * 3_000]


def _table() -> Table:
    return Table("ids_under_test", MetaData(), Column("id", Integer, primary_key=True), Column("tid", String),
                 Column("gone", Integer))


@pytest.mark.parametrize("listed", [HOSTILE, HOSTILE[:1], [*HOSTILE, "nul\x00x"], ["nul\x00x"]],
                         ids=["hostile", "one", "with-a-nul", "only-a-nul"])
def test_the_ids_left_out_are_exactly_those_not_listed(engine: Engine, listed: list[str]) -> None:
    if engine.dialect.name != "sqlite" and any("\x00" in v for v in listed):
        pytest.skip("PostgreSQL text holds no NUL")
    table = _table()
    stored = [v for v in [*HOSTILE, "nul\x00x", "gone-1", "gone-2"] if engine.dialect.name == "sqlite" or "\x00" not in v]
    table.metadata.create_all(engine)
    try:
        with engine.begin() as connection:
            connection.execute(table.insert(), [{"tid": v} for v in stored])
            connection.execute(update(table).where(not_among(engine.dialect.name, table.c.tid, listed))
                               .values(gone=1))
            gone = set(connection.scalars(select(table.c.tid).where(table.c.gone == 1)))
        assert gone == {v for v in stored if v not in listed}
        assert "gone-1" in gone
    finally:
        table.metadata.drop_all(engine)


def test_on_sqlite_the_statement_is_the_same_whatever_the_number_of_ids() -> None:
    table = _table()
    texts = {str(update(table).where(not_among("sqlite", table.c.tid, [f"id-{i}" for i in range(n)])).values(gone=1)
                 .compile(dialect=sqlite.dialect())) for n in (1, 2, 500, 5_000)}
    assert len(texts) == 1 and "json_each(?)" in texts.pop()
    plain = str(update(table).where(not_among("postgresql", table.c.tid, ["a", "b"])).values(gone=1)
                .compile(dialect=sqlite.dialect(), compile_kwargs={"render_postcompile": True}))
    assert "NOT IN (?, ?)" in plain


def test_a_list_with_a_nul_goes_as_a_plain_list() -> None:
    table = _table()
    compiled = str(update(table).where(not_among("sqlite", table.c.tid, ["a", "n\x00"])).values(gone=1)
                   .compile(dialect=sqlite.dialect(), compile_kwargs={"render_postcompile": True}))
    assert "json_each" not in compiled and "NOT IN (?, ?)" in compiled


def test_the_recorder_marks_ids_gone_with_one_statement_text_whatever_the_poll_lists(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        pytest.skip("the JSON array is SQLite's")
    from sqlalchemy import event

    from txnwatch.store import models as m
    from txnwatch.store.db import make_sessionmaker
    from txnwatch.store.recorder import Recorder

    from .test_recorder import snapshot

    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *_: object) -> None:
        if statement.startswith("UPDATE txn_ids SET gone_at"):
            statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    rec = Recorder(make_sessionmaker(engine), {"c": "h:9092"})
    rec.start()
    polls = [("app-1", "app-2", "app-3", "app-4"), ("app-1", "app-2", "app-3"), ("app-1",), ("app-1", "app-5")]
    for k, ids in enumerate(polls):
        rec.on_poll("c", snapshot(1_700_000_000_000 + 15_000 * k, ids), None, None, 0)
    with make_sessionmaker(engine)() as s:
        gone = {r.transactional_id for r in s.scalars(select(m.TransactionState).where(
            m.TransactionState.gone_at.is_not(None)))}
    assert gone == {"app-2", "app-3", "app-4"}
    assert len(statements) == len(polls) and len(set(statements)) == 1
