"""An install without a compiled module (setup.py's optional extensions) says so once, with why and what it costs."""

from __future__ import annotations

import logging

import pytest

from txnwatch.core import extras


def test_each_missing_compiled_part_is_said_once_with_its_reason_and_cost(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(extras, "_SAID_UNCOMPILED", set())
    log = logging.getLogger("txnwatch.test")
    with caplog.at_level(logging.WARNING, logger="txnwatch.test"):
        assert extras.say_uncompiled(log, "the compiled walk", "reading t with the Python walk", "about 1.3x the CPU",
                                     "No module named 'x'")
        assert not extras.say_uncompiled(log, "the compiled walk", "reading t with the Python walk",
                                         "about 1.3x the CPU", "No module named 'x'")
        assert extras.say_uncompiled(log, "the compiled stream-row builder", "storing rows in Python",
                                     "about 1.2x the writer's CPU", None)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "reading t with the Python walk, about 1.3x the CPU: the compiled walk is not installed (No module named 'x'); "
        "reinstall txnwatch where a C compiler and Python's headers are",
        "storing rows in Python, about 1.2x the writer's CPU: the compiled stream-row builder is not installed (None); "
        "reinstall txnwatch where a C compiler and Python's headers are"]


def test_the_tail_stores_through_stream_rows_and_says_so_once_without_the_compiled_parameters(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import create_engine, text

    from txnwatch.store import txnlog as store_txnlog

    monkeypatch.setattr(extras, "_SAID_UNCOMPILED", set())
    monkeypatch.setattr(store_txnlog, "STREAM_PARAMS", None)
    staged: list[list[tuple[object, ...]]] = []
    monkeypatch.setattr(store_txnlog, "_stage", lambda session, rows: staged.append(rows))
    engine = create_engine("sqlite://")
    with caplog.at_level(logging.WARNING, logger=store_txnlog.__name__), engine.begin() as connection:
        connection.execute(text("SELECT 1"))
        for _ in range(2):
            store_txnlog.stage_transitions_of(connection, 1, 2, [])
    assert staged == [[], []]  # stream_rows' rows, through _stage
    assert [r.getMessage().split(":")[0] for r in caplog.records] == [
        "storing the transaction log's stream rows in Python, about 1.2x the writer's CPU per record"]
