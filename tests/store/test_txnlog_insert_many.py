"""The stream rows' multi-row INSERTs on SQLite (store/txnlog.py _insert_many): the same rows, stored the same way,
in the same id order as the executemany they replace."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, text

from txnwatch.core.findings import Transition
from txnwatch.core.vocabulary import TransitionSource
from txnwatch.detect import txnlog as d
from txnwatch.store import models as m
from txnwatch.store import txnlog as store_txnlog

from .test_txnlog_tail import registered, the_log


def _rows(cluster_id: int, first: int, n: int) -> list[tuple[Any, ...]]:
    out = []
    for j in range(n):  # the same pattern of NULLs and values whatever ``first``
        i = first + j
        out.append((cluster_id, m.TRANSACTION_LOG, 1_800_000_000_500, f"app-é-{j % 4}", 1_800_000_000_000 + i, j % 3, i,
                    None if j % 5 == 0 else "Ongoing", "PrepareCommit", 2**40 + i, j % 32767, None if j % 2 else 7,
                    None if j % 2 else 1, 60_000, None if j % 7 == 0 else 1_800_000_000_000, "t-0,t-1" if j % 3 else "",
                    "commit,epoch_bump", None if j % 4 else j * 3, 2, None if j % 6 else "detail, with ' quote"))
    return out


@pytest.mark.parametrize("per_statement", [1, 3, 2_000])
def test_multi_row_inserts_store_what_executemany_stores_in_the_same_order(engine: Engine, per_statement: int,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_txnlog, "_MAX_ROWS_PER_INSERT", per_statement)
    sessions = registered(engine)
    with sessions.begin() as session:
        cid = session.execute(text("SELECT id FROM clusters")).scalar_one()
        plain, many = _rows(cid, 0, 11), _rows(cid, 1_000, 11)
        store_txnlog._insert_plain(session, store_txnlog.STREAM_COLUMNS, plain)
        store_txnlog._insert_many(session, store_txnlog.STREAM_COLUMNS, many)
    columns = ", ".join(store_txnlog.STREAM_COLUMNS)
    kinds = ", ".join(f"typeof({c})" if engine.dialect.name == "sqlite" else f"pg_typeof({c})::text"
                      for c in store_txnlog.STREAM_COLUMNS)
    with sessions() as session:
        stored = [tuple(r) for r in session.execute(text(
            f"SELECT {columns}, {kinds} FROM {m.TransactionTransition.__tablename__} ORDER BY id"))]
    width = len(store_txnlog.STREAM_COLUMNS)
    assert [r[:width] for r in stored] == plain + many  # every value back as given, in insertion order
    assert [r[6] for r in stored] == list(range(11)) + list(range(1_000, 1_011))  # log_offset
    assert [r[width:] for r in stored[:11]] == [r[width:] for r in stored[11:]]  # stored as the same types


def test_multi_row_upserts_of_ids_keep_the_first_sighting_and_store_the_latest_state(
        engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(store_txnlog, "_MAX_ROWS_PER_INSERT", 2)  # 7 ids: statements of 2, 2, 2 and 1 rows
    sessions = registered(engine)
    log = the_log(ids=7, transactions=6)
    records = [r for p in sorted(log) for r in log[p]]
    early, _ = d.apply(d.TxnLogState(), [r for r in records if r.offset < 5])
    late, _ = d.apply(d.TxnLogState(), records)
    with sessions.begin() as session:
        cid = session.execute(text("SELECT id FROM clusters")).scalar_one()
        store_txnlog._upsert_ids(session, cid, sorted(early.ids.items()))
    with sessions.begin() as session:
        store_txnlog._upsert_ids(session, cid, sorted(late.ids.items()))
    with sessions() as session:
        resumed = store_txnlog.load(session, cid)
        first_seen: dict[str, Any] = dict(session.execute(text(
            f"SELECT transactional_id, first_seen_at FROM {m.TransactionState.__tablename__}")).all())
        updated: dict[str, Any] = dict(session.execute(text(
            f"SELECT transactional_id, last_update_at FROM {m.TransactionState.__tablename__}")).all())
    assert len(late.ids) == 7 and dict(resumed.state.ids) == dict(late.ids)
    assert early.ids and all(first_seen[tid] != updated[tid] for tid in early.ids)  # the first sighting stays
    assert all(first_seen[tid] == updated[tid] for tid in late.ids if tid not in early.ids)


def test_stream_rows_put_every_field_of_the_transition_in_its_column() -> None:
    """stream_rows builds each row from slices of the transition (the hot path): this pins Transition's field
    order against STREAM_COLUMNS, field by field, with a transition whose every field differs (its source, the
    last field, is the stream's constant)."""
    x = Transition(transactional_id="app-1", at_ms=1_800_000_000_001, log_partition=7, log_offset=42,
                   from_state="Ongoing", to_state="PrepareAbort", producer_id=2**40, producer_epoch=5,
                   prev_producer_id=2**41, prev_producer_epoch=4, timeout_ms=60_000, start_ms=1_800_000_000_000,
                   partitions=(("orders", 3), ("audit", 0)), events=("epoch_bump", "fenced"), duration_ms=17,
                   client_transaction_version=2, detail="a detail", source=TransitionSource.TRANSACTION_LOG)
    assert Transition._fields == (*store_txnlog.STREAM_COLUMNS[3:], "source")  # the columns are its fields' names
    (row,) = store_txnlog.stream_rows(9, 1_800_000_000_500, [x])
    by_column = dict(zip(store_txnlog.STREAM_COLUMNS, row, strict=True))
    assert by_column == {
        "cluster_id": 9, "source": m.TRANSACTION_LOG, "staged_at_ms": 1_800_000_000_500, "transactional_id": "app-1",
        "at_ms": 1_800_000_000_001, "log_partition": 7, "log_offset": 42, "from_state": "Ongoing",
        "to_state": "PrepareAbort", "producer_id": 2**40, "producer_epoch": 5, "prev_producer_id": 2**41,
        "prev_producer_epoch": 4, "timeout_ms": 60_000, "start_ms": 1_800_000_000_000,
        "partitions": "orders-3,audit-0", "events": "epoch_bump,fenced", "duration_ms": 17,
        "client_transaction_version": 2, "detail": "a detail"}
    empty = x._replace(partitions=(), events=())
    assert [r[15:17] for r in store_txnlog.stream_rows(9, 0, [empty, x, empty])] == [
        ("", ""), ("orders-3,audit-0", "epoch_bump,fenced"), ("", "")]  # the joined text, cached or not


@pytest.mark.parametrize("ms", [
    pytest.param(1_800_000_000_123, id="now-ish"), pytest.param(1_800_000_000_000, id="a whole second"),
    pytest.param(0, id="the epoch"), pytest.param(-5, id="just before the epoch"),
    pytest.param(253_402_300_799_999, id="the last millisecond of 9999"),
    pytest.param(-61_000_000_000_000, id="a damaged time, year 37"),
])
def test_sqlite_time_text_is_what_the_orm_column_stores(ms: int) -> None:
    """The ids' rows are written driver-level on SQLite with their times as text: that text must stay the one
    strftime gives (what the rows were written with before, and what UtcDateTime reads back)."""
    from txnwatch.core.epoch import from_ms

    assert store_txnlog._sql_time(ms, True) == from_ms(ms).strftime("%Y-%m-%d %H:%M:%S.%f")
    assert store_txnlog._sql_time(ms, False) == from_ms(ms)
