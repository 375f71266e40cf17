"""One transition table for both sources (issue 24): each source reaches the archive from its own high-water id,
the log's stream leaves the database once archived while its anomalies stay for retention.days, and a version-1
archive manifest (two tables, two id sequences) carries on where it stopped."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from sqlalchemy import Engine, select

from txnwatch.core.epoch import to_ms
from txnwatch.store import models as m
from txnwatch.store.archive import (
    MANIFEST,
    MOVED_LOG_ID_SHIFT,
    export_history,
    export_transitions_then_purge,
    open_archive,
    read_manifest,
)
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.retention import purge

NOW = datetime.now(timezone.utc).replace(microsecond=0)


def _row(cluster_id: int, source: str, at: datetime, *, anomaly: str | None = None, offset: int | None = None,
         id: int | None = None, tid: str = "app") -> m.TransactionTransition:
    logged = source == m.TRANSACTION_LOG
    return m.TransactionTransition(
        id=id, cluster_id=cluster_id, source=source, anomaly=anomaly, transactional_id=tid, at_ms=to_ms(at),
        staged_at_ms=to_ms(at), from_state="Ongoing", to_state="CompleteAbort", producer_id=7, producer_epoch=1,
        timeout_ms=60_000, partitions="orders-0", events="fenced,abort" if anomaly else "abort",
        log_partition=3 if logged else None, log_offset=offset, client_transaction_version=2 if logged else None)


def _cluster(engine: Engine) -> int:
    with make_sessionmaker(engine).begin() as s:
        cluster = m.Cluster(name="c", bootstrap_servers="h:1", created_at=NOW)
        s.add(cluster)
        s.flush()
        return cluster.id


def _left(engine: Engine) -> list[tuple[str, str | None, int]]:
    X = m.TransactionTransition
    with make_sessionmaker(engine)() as s:
        return [tuple(r) for r in s.execute(select(X.source, X.anomaly, X.at_ms).order_by(X.id))]  # type: ignore[misc]  # rows of three columns


def _archived(root: Path) -> list[dict[str, Any]]:
    fs, base = open_archive(str(root))
    rows: list[dict[str, Any]] = []
    for path in sorted(read_manifest(fs, base).table("transitions").files):
        rows += pq.read_table(str(root / path)).to_pylist()
    return sorted(rows, key=lambda r: r["id"])


def test_anomalies_outlive_the_stream_and_both_sources_reach_the_archive(engine: Engine, tmp_path: Path) -> None:
    cid = _cluster(engine)
    two_hours, twenty_days = NOW - timedelta(hours=2), NOW - timedelta(days=20)
    with make_sessionmaker(engine).begin() as s:
        s.add_all([_row(cid, m.POLL, twenty_days),
                   _row(cid, m.TRANSACTION_LOG, two_hours, offset=104),
                   # The fence the stream row showed: the same log position, its own row.
                   _row(cid, m.TRANSACTION_LOG, two_hours, anomaly="fenced", offset=104),
                   _row(cid, m.TRANSACTION_LOG, twenty_days, anomaly="timeout_abort", offset=90)])
    purged = export_transitions_then_purge(engine, make_sessionmaker(engine), str(tmp_path), hot=timedelta(hours=1),
                                           settle=timedelta(0))
    assert purged == 1, "only the log's plain transition leaves with the stream's short window"
    assert _left(engine) == [(m.POLL, None, to_ms(twenty_days)),
                             (m.TRANSACTION_LOG, "fenced", to_ms(two_hours)),
                             (m.TRANSACTION_LOG, "timeout_abort", to_ms(twenty_days))]
    archived = _archived(tmp_path)
    assert [(r["log_offset"], r["events"]) for r in archived] == [(None, ["abort"]), (104, ["abort"])], \
        "both sources' transitions, no anomaly"
    fs, base = open_archive(str(tmp_path))
    state = read_manifest(fs, base).table("transitions")
    assert state.last_ids == {m.POLL: archived[0]["id"], m.TRANSACTION_LOG: archived[1]["id"]}

    deleted = purge(make_sessionmaker(engine), NOW, days=14)
    assert (deleted["transitions:poll"], deleted["transitions:anomalies"]) == (1, 1)
    assert _left(engine) == [(m.TRANSACTION_LOG, "fenced", to_ms(two_hours))]


def _version_1_manifest(root: Path, polled_last_id: int, stream_last_id: int) -> None:
    """What the release before migration 0009 wrote: the polled rows' and the stream's high-water ids apart."""
    root.mkdir(parents=True, exist_ok=True)
    (root / MANIFEST).write_text(json.dumps({"version": 1, "tables": {
        "transitions": {"last_id": polled_last_id, "open_ids": [], "rows": 0, "files": []},
        "txnlog_stream": {"last_id": stream_last_id, "open_ids": [], "rows": 0, "files": []}}}))


def test_a_version_1_manifest_carries_on_where_each_source_stopped(engine: Engine, tmp_path: Path) -> None:
    cid = _cluster(engine)
    old = NOW - timedelta(hours=1)
    with make_sessionmaker(engine).begin() as s:
        # As migration 0009 leaves them: polled ids kept, the stream's shifted.
        s.add_all([_row(cid, m.POLL, old, id=i, tid=f"poll-{i}") for i in (1, 2, 3)])
        s.add_all([_row(cid, m.TRANSACTION_LOG, old, id=MOVED_LOG_ID_SHIFT + i, offset=i, tid=f"log-{i}")
                   for i in (1, 2, 3, 4)])
    _version_1_manifest(tmp_path, polled_last_id=2, stream_last_id=3)
    export_history(engine, str(tmp_path), settle=timedelta(0))
    assert [r["transactional_id"] for r in _archived(tmp_path)] == ["poll-3", "log-4"]
    fs, base = open_archive(str(tmp_path))
    manifest = read_manifest(fs, base)
    assert manifest.moved_log_id is None and "txnlog_stream" not in manifest.tables
    assert manifest.table("transitions").last_ids == {m.POLL: 3, m.TRANSACTION_LOG: MOVED_LOG_ID_SHIFT + 4}


def test_a_version_1_manifest_over_an_empty_stream_exports_every_new_log_row(engine: Engine, tmp_path: Path) -> None:
    """The stream was empty at the upgrade (all archived and purged); on SQLite the one table's ids then restart
    low, below the old stream's high-water id + the shift: every log row is new and goes to the archive."""
    cid = _cluster(engine)
    old = NOW - timedelta(hours=1)
    with make_sessionmaker(engine).begin() as s:
        s.add_all([_row(cid, m.POLL, old, id=1, tid="poll-1"),
                   _row(cid, m.TRANSACTION_LOG, old, id=2, offset=9, tid="log-new")])
    _version_1_manifest(tmp_path, polled_last_id=1, stream_last_id=500)
    export_history(engine, str(tmp_path), settle=timedelta(0))
    assert [r["transactional_id"] for r in _archived(tmp_path)] == ["log-new"]
