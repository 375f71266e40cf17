"""History archive: the store's history tables as hive-partitioned Parquet for the pipeline.

Layout under the archive root (a local path or any URI ``pyarrow.fs`` understands)::

    _manifest.json
    <table>/cluster=<name>/date=YYYY-MM-DD/part-<first id>-<last id>.parquet

The manifest is the archive's commit log: readers take only the files it lists,
and the exporter deletes files it does not list before writing.  A crash between
writing files and rewriting the manifest therefore leaves orphans that are never
read and are removed on the next run, which re-exports the same rows — no
duplicates, whatever the chunk boundaries turn out to be.  The manifest is replaced
atomically (write a temporary file, then rename).

Append-only tables are exported incrementally by id.  Episodes (LSO stalls, hanging
transactions) are updated in place until they end, so only *closed* episodes are
exported, once, into the date they started; the ids of episodes still open at the
last export are remembered in the manifest and picked up when they close.
"""

from __future__ import annotations

import contextlib
import json
import os
import posixpath
import re
import threading
import uuid
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from sqlalchemy import Engine, delete, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql import ColumnElement

from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.store import models as m

MANIFEST = "_manifest.json"
#: 2: the ``transitions`` table keeps one high-water id per source (``last_ids``), since both sources share one
#: database table and id sequence (migration 0009); version 1 manifests are read and converted.
MANIFEST_VERSION = 2
#: Migration 0009 moved the transaction log's staged rows into the one transition table with their ids plus
#: this (the polled rows kept theirs, which the archive's rows carry): a version-1 manifest's log high-water id
#: plus this is the same row in the new table.  The migration keeps its own copy of the number.
MOVED_LOG_ID_SHIFT = 1 << 40
DEFAULT_CHUNK_ROWS = 50_000
DEFAULT_SETTLE = timedelta(minutes=2)

_TS = pa.timestamp("us", tz="UTC")
_STRINGS = pa.list_(pa.string())


@dataclass(frozen=True)
class ArchiveTable:
    """How one history table maps to the archive."""

    name: str
    model: type[m.Base]
    time_column: str
    schema: pa.Schema
    end_column: str | None = None  # episodes: exported once this is set

    @property
    def episodic(self) -> bool:
        return self.end_column is not None


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field("id", pa.int64(), nullable=False), *(pa.field(n, t) for n, t in fields)])


TABLES: dict[str, ArchiveTable] = {t.name: t for t in (
    # Written per source from models.TransactionTransition's plain columns (export_transitions), anomalies left out.
    ArchiveTable("transitions", m.TransactionTransition, "observed_at", _schema(
        ("transactional_id", pa.string()), ("observed_at", _TS), ("from_state", pa.string()),
        ("to_state", pa.string()), ("producer_id", pa.int64()), ("producer_epoch", pa.int32()),
        ("prev_producer_id", pa.int64()), ("prev_producer_epoch", pa.int32()), ("timeout_ms", pa.int64()),
        ("txn_started_at", _TS), ("partitions", _STRINGS), ("events", _STRINGS), ("duration_ms", pa.int64()),
        ("log_partition", pa.int32()), ("log_offset", pa.int64()), ("client_transaction_version", pa.int32()))),
    ArchiveTable("offsets", m.PartitionOffsetSample, "sampled_at", _schema(
        ("topic", pa.string()), ("partition", pa.int32()), ("sampled_at", _TS), ("leader", pa.int32()),
        ("high_watermark", pa.int64()), ("last_stable_offset", pa.int64()), ("log_start_offset", pa.int64()),
        ("open_transactions", pa.int32()))),
    ArchiveTable("lso_stalls", m.LsoStallEpisode, "started_at", _schema(
        ("topic", pa.string()), ("partition", pa.int32()), ("started_at", _TS), ("ended_at", _TS),
        ("last_seen_at", _TS), ("stalled_lso", pa.int64()), ("max_gap", pa.int64()),
        ("blocking_producer_id", pa.int64()), ("blocking_producer_epoch", pa.int32()),
        ("blocking_transactional_id", pa.string())), end_column="ended_at"),
    ArchiveTable("hanging", m.HangingEpisode, "first_seen_at", _schema(
        ("incident_key", pa.string()), ("topic", pa.string()), ("partition", pa.int32()),
        ("producer_id", pa.int64()), ("producer_epoch", pa.int32()), ("transactional_id", pa.string()),
        ("coordinator_id", pa.int32()), ("reason", pa.string()), ("txn_start_offset", pa.int64()),
        ("last_write_at", _TS), ("first_seen_at", _TS), ("last_seen_at", _TS), ("resolved_at", _TS)),
        end_column="resolved_at"),
    ArchiveTable("verification", m.VerificationSample, "observed_at", _schema(
        ("topic", pa.string()), ("partition", pa.int32()), ("producer_id", pa.int64()),
        ("transactional_id", pa.string()), ("observed_at", _TS), ("verification_ms", pa.int64()),
        ("failed", pa.bool_()))),
    ArchiveTable("lag", m.ConsumerLagSample, "sampled_at", _schema(
        ("group_id", pa.string()), ("topic", pa.string()), ("partition", pa.int32()), ("sampled_at", _TS),
        ("committed_offset", pa.int64()), ("lag_hwm", pa.int64()), ("lag_lso", pa.int64()),
        ("lag_seconds", pa.float64()), ("lag_seconds_unknown", pa.string()))),
)}


# -- filesystem and manifest ---------------------------------------------------------------


def open_archive(uri: str) -> tuple[pafs.FileSystem, str]:
    """A local path or a filesystem URI (s3://, hdfs://, gs://, file://) to (filesystem, root path)."""
    if "://" not in uri:
        return pafs.LocalFileSystem(), os.path.abspath(uri)
    return pafs.FileSystem.from_uri(uri)


@dataclass
class TableState:
    last_id: int = 0
    open_ids: list[int] = field(default_factory=list)
    files: dict[str, int] = field(default_factory=dict)  # relative path -> rows
    #: ``transitions``: the high-water id of each source (rows of both share one id sequence but settle apart).
    last_ids: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.files.values())


@dataclass
class Manifest:
    tables: dict[str, TableState] = field(default_factory=dict)
    #: A version-1 manifest's high-water id of the log's staged stream, until export_transitions converts it.
    moved_log_id: int | None = None

    def table(self, name: str) -> TableState:
        return self.tables.setdefault(name, TableState())

    def to_json(self) -> str:
        return json.dumps({"version": MANIFEST_VERSION, "tables": {
            name: {"last_id": s.last_id, "open_ids": s.open_ids, "rows": s.rows,
                   "files": [{"path": p, "rows": n} for p, n in sorted(s.files.items())],
                   **({"last_ids": dict(sorted(s.last_ids.items()))} if s.last_ids else {})}
            for name, s in sorted(self.tables.items())},
            **({"moved_log_id": self.moved_log_id} if self.moved_log_id is not None else {})}, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        raw = json.loads(text)
        version = raw.get("version")
        if version not in (1, MANIFEST_VERSION):
            raise ValueError(f"unsupported archive manifest version {version!r}")
        manifest = cls({name: TableState(t["last_id"], list(t.get("open_ids", [])),
                                         {f["path"]: int(f["rows"]) for f in t["files"]},
                                         {k: int(v) for k, v in t.get("last_ids", {}).items()})
                        for name, t in raw["tables"].items()}, raw.get("moved_log_id"))
        if version == 1:
            _from_version_1(manifest)
        return manifest


#: Version 1's entry holding only the high-water id of the log's staged stream (its table before 0009).
_V1_LOG_ENTRY = "txnlog_stream"


def _from_version_1(manifest: Manifest) -> None:
    """Version 1 kept the polled transitions' high-water id as ``transitions.last_id`` (their ids are unchanged
    in the one table) and the log's in an entry of its own (converted once the database can be asked)."""
    transitions = manifest.table("transitions")
    transitions.last_ids[m.POLL] = transitions.last_id
    book = manifest.tables.pop(_V1_LOG_ENTRY, None)
    manifest.moved_log_id = book.last_id if book is not None else 0


def read_manifest(fs: pafs.FileSystem, root: str) -> Manifest:
    path = posixpath.join(root, MANIFEST)
    if fs.get_file_info(path).type == pafs.FileType.NotFound:
        return Manifest()
    with fs.open_input_stream(path) as f:
        return Manifest.from_json(f.read().decode())


def write_manifest(fs: pafs.FileSystem, root: str, manifest: Manifest) -> None:
    fs.create_dir(root, recursive=True)
    tmp = posixpath.join(root, f".{MANIFEST}.{uuid.uuid4().hex}.tmp")
    with fs.open_output_stream(tmp) as f:
        f.write(manifest.to_json().encode())
    fs.move(tmp, posixpath.join(root, MANIFEST))


def partition_dir(table: str, cluster: str, day: str) -> str:
    return f"{table}/cluster={quote(cluster, safe='')}/date={day}"


# -- export ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExportResult:
    table: str
    rows: int
    files: int
    removed_orphans: int


def _remove_orphans(fs: pafs.FileSystem, root: str, table: str, state: TableState) -> int:
    base = posixpath.join(root, table)
    if fs.get_file_info(base).type == pafs.FileType.NotFound:
        return 0
    removed = 0
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True)):
        rel = posixpath.relpath(info.path, root)
        if info.type == pafs.FileType.File and rel not in state.files:
            fs.delete_file(info.path)
            removed += 1
    return removed


def _select(spec: ArchiveTable) -> Any:
    model = spec.model
    cols = [getattr(model, f.name) for f in spec.schema]
    return (select(m.Cluster.name, *cols)
            .join(m.Cluster, m.Cluster.id == model.cluster_id)  # type: ignore[attr-defined]  # archive specs name any mapped model; all have cluster_id
            .order_by(model.id))  # type: ignore[attr-defined]  # archive specs name any mapped model; all have id


def _chunks(engine: Engine, spec: ArchiveTable, where: ColumnElement[bool],
            chunk_rows: int) -> Iterator[Sequence[Any]]:
    """Keyset pagination by id: memory stays at one chunk whatever the table's size."""
    model_id = spec.model.id  # type: ignore[attr-defined]  # archive specs name any mapped model; all have id
    after = -1
    while True:
        with engine.connect() as conn:
            rows = conn.execute(_select(spec).where(where, model_id > after).limit(chunk_rows)).all()
        if not rows:
            return
        yield rows
        after = rows[-1][1]


def _write_chunk(fs: pafs.FileSystem, root: str, spec: ArchiveTable, rows: Sequence[Any],
                 state: TableState, prefix: str = "part") -> int:
    time_index = 1 + spec.schema.get_field_index(spec.time_column)
    buckets: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in rows:
        at: datetime = row[time_index]
        buckets[(row[0], at.date().isoformat())].append(row)
    for (cluster, day), bucket in sorted(buckets.items()):
        columns = {f.name: [r[i + 1] for r in bucket] for i, f in enumerate(spec.schema)}
        table = pa.Table.from_pydict(columns, schema=spec.schema)
        directory = posixpath.join(root, partition_dir(spec.name, cluster, day))
        fs.create_dir(directory, recursive=True)
        name = f"{prefix}-{bucket[0][1]:012d}-{bucket[-1][1]:012d}.parquet"
        pq.write_table(table, posixpath.join(directory, name), filesystem=fs, compression="zstd")
        state.files[posixpath.join(partition_dir(spec.name, cluster, day), name)] = len(bucket)
    return len(buckets)


def export_table(engine: Engine, fs: pafs.FileSystem, root: str, manifest: Manifest, spec: ArchiveTable,
                 chunk_rows: int = DEFAULT_CHUNK_ROWS, settle: timedelta = DEFAULT_SETTLE) -> ExportResult:
    """Ids are handed out before commit, so on PostgreSQL a lower id can become visible after a
    higher one was exported.  Export stops at the first row younger than ``settle``: every
    writer transaction older than that has committed, so the exported id range has no holes."""
    state = manifest.table(spec.name)
    orphans = _remove_orphans(fs, root, spec.name, state)
    model_id = spec.model.id  # type: ignore[attr-defined]  # archive specs name any mapped model; all have id
    with engine.connect() as conn:
        high = conn.execute(select(model_id).order_by(model_id.desc()).limit(1)).scalar() or state.last_id
    fresh = (model_id > state.last_id) & (model_id <= high)
    rows = files = 0
    if not spec.episodic:
        time_index = 1 + spec.schema.get_field_index(spec.time_column)
        cutoff = datetime.now(timezone.utc) - settle
        for chunk in _chunks(engine, spec, fresh, chunk_rows):
            recent = next((i for i, r in enumerate(chunk) if r[time_index] >= cutoff), None)
            settled = chunk if recent is None else chunk[:recent]
            if settled:
                files += _write_chunk(fs, root, spec, settled, state)
                rows += len(settled)
                state.last_id = settled[-1][1]
                write_manifest(fs, root, manifest)
            if recent is not None:
                break
    else:
        end = getattr(spec.model, spec.end_column)  # type: ignore[arg-type]  # the end column is named in the spec; getattr is typed loosely
        candidates = fresh | model_id.in_(state.open_ids) if state.open_ids else fresh
        for chunk in _chunks(engine, spec, candidates & end.is_not(None), chunk_rows):
            files += _write_chunk(fs, root, spec, chunk, state)
            rows += len(chunk)
        with engine.connect() as conn:
            state.open_ids = sorted(conn.execute(select(model_id).where(candidates & end.is_(None))).scalars())
        state.last_id = max(state.last_id, high)
    write_manifest(fs, root, manifest)
    return ExportResult(spec.name, rows, files, orphans)


def export_history(engine: Engine, archive_uri: str, tables: Mapping[str, ArchiveTable] = TABLES,
                   chunk_rows: int = DEFAULT_CHUNK_ROWS, settle: timedelta = DEFAULT_SETTLE) -> list[ExportResult]:
    """Export everything new since the last run; safe to re-run and to run after a crash.

    Serialised within the process: the hourly export and the minutely transition export
    both rewrite the manifest."""
    with _EXPORT_LOCK:
        fs, root = open_archive(archive_uri)
        fs.create_dir(root, recursive=True)
        manifest = read_manifest(fs, root)
        return [export_transitions(engine, fs, root, manifest, chunk_rows, settle) if spec.name == "transitions"
                else export_table(engine, fs, root, manifest, spec, chunk_rows, settle) for spec in tables.values()]


_EXPORT_LOCK = threading.Lock()


#: File name prefix per source in the archive's ``transitions`` table.
_PREFIX = {m.POLL: "part", m.TRANSACTION_LOG: "log-part"}


def export_transitions(engine: Engine, fs: pafs.FileSystem, root: str, manifest: Manifest,
                       chunk_rows: int = DEFAULT_CHUNK_ROWS, settle: timedelta = DEFAULT_SETTLE) -> ExportResult:
    """The one transition table (models.TransactionTransition) into the archive's ``transitions`` table, source by source,
    each incremental by id from its own high-water id and stopping at rows written less than ``settle`` ago
    (ids are handed out before commit).  Anomalies stay in the database (their transitions are exported)."""
    state = manifest.table("transitions")
    orphans = _remove_orphans(fs, root, "transitions", state)
    if manifest.moved_log_id is not None:
        state.last_ids[m.TRANSACTION_LOG] = _moved_log_watermark(engine, manifest.moved_log_id)
        manifest.moved_log_id = None
        write_manifest(fs, root, manifest)
    rows = files = 0
    for source in (m.POLL, m.TRANSACTION_LOG):
        n, f = _export_source(engine, fs, root, manifest, source, chunk_rows, settle)
        rows, files = rows + n, files + f
    write_manifest(fs, root, manifest)
    return ExportResult("transitions", rows, files, orphans)


def _moved_log_watermark(engine: Engine, archived: int) -> int:
    """A version-1 manifest's log high-water id in the one table's id space.  Migration 0009 moved the staged
    rows to their id + MOVED_LOG_ID_SHIFT; if it moved none (and, on SQLite, the sequence restarted low),
    every log row there is newer than the manifest, and all of them are exported."""
    X = m.TransactionTransition
    with engine.connect() as conn:
        moved = conn.execute(select(X.id).where(X.source == m.TRANSACTION_LOG, X.id > MOVED_LOG_ID_SHIFT)
                             .limit(1)).first()
    return archived + MOVED_LOG_ID_SHIFT if moved is not None else 0


def _export_source(engine: Engine, fs: pafs.FileSystem, root: str, manifest: Manifest, source: str,
                   chunk_rows: int, settle: timedelta) -> tuple[int, int]:
    X = m.TransactionTransition
    spec, state = TABLES["transitions"], manifest.table("transitions")
    cutoff_ms = to_ms(datetime.now(timezone.utc) - settle)
    rows = files = 0
    while True:
        with engine.connect() as conn:
            chunk = conn.execute(
                select(m.Cluster.name, X.id, X.transactional_id, X.at_ms, X.from_state, X.to_state, X.producer_id,
                       X.producer_epoch, X.prev_producer_id, X.prev_producer_epoch, X.timeout_ms, X.start_ms,
                       X.partitions, X.events, X.duration_ms, X.log_partition, X.log_offset,
                       X.client_transaction_version, X.staged_at_ms)
                .join(m.Cluster, m.Cluster.id == X.cluster_id)
                .where(X.source == source, X.anomaly.is_(None), X.id > state.last_ids.get(source, 0))
                .order_by(X.id).limit(chunk_rows)).all()
        if not chunk:
            break
        recent = next((i for i, r in enumerate(chunk) if r.staged_at_ms >= cutoff_ms), None)
        settled = chunk if recent is None else chunk[:recent]
        if settled:
            converted = [(r.name, r.id, r.transactional_id, from_ms(r.at_ms), r.from_state, r.to_state,
                          r.producer_id, r.producer_epoch, r.prev_producer_id, r.prev_producer_epoch, r.timeout_ms,
                          from_ms(r.start_ms), m.split(r.partitions), m.split(r.events), r.duration_ms,
                          r.log_partition, r.log_offset, r.client_transaction_version) for r in settled]
            files += _write_chunk(fs, root, spec, converted, state, prefix=_PREFIX[source])
            rows += len(settled)
            state.last_ids[source] = settled[-1].id
            write_manifest(fs, root, manifest)
        if recent is not None:
            break
    return rows, files


def export_transitions_then_purge(engine: Engine, sessions: sessionmaker[Session], archive_uri: str,
                                  hot: timedelta, batch: int = 20_000, settle: timedelta = DEFAULT_SETTLE) -> int:
    """The transaction log's full transition stream is staged in the one transition table (source
    ``transaction_log``, no anomaly); once a row is in the archive (its id at or below the manifest's log
    high-water id) and was staged longer than ``hot`` ago, it leaves the database.  Anomalies and polled rows
    follow retention.days instead (retention.py).  Returns how many rows were purged."""
    X = m.TransactionTransition
    export_history(engine, archive_uri, tables={"transitions": TABLES["transitions"]}, settle=settle)
    fs, root = open_archive(archive_uri)
    archived = read_manifest(fs, root).table("transitions").last_ids.get(m.TRANSACTION_LOG, 0)
    cutoff_ms = to_ms(datetime.now(timezone.utc) - hot)
    purged = 0
    while True:
        with sessions.begin() as session:
            ids = list(session.scalars(select(X.id).where(X.id <= archived, X.source == m.TRANSACTION_LOG,
                                                          X.anomaly.is_(None), X.staged_at_ms < cutoff_ms)
                                       .order_by(X.id).limit(batch)))
            if ids:
                session.execute(delete(X).where(X.id.in_(ids)))
        purged += len(ids)
        if len(ids) < batch:
            return purged


_DAY = re.compile(r"/date=(\d{4}-\d{2}-\d{2})/")


def prune_archive(archive_uri: str, keep_days: float, now: datetime | None = None) -> int:
    """Archive retention: drop date partitions older than ``keep_days`` from the manifest, then their files
    (manifest first, so a crash in between leaves orphans the next export removes, never a listed hole)."""
    cutoff = ((now or datetime.now(timezone.utc)) - timedelta(days=keep_days)).date()
    with _EXPORT_LOCK:
        fs, root = open_archive(archive_uri)
        manifest = read_manifest(fs, root)
        doomed = []
        for state in manifest.tables.values():
            for path in list(state.files):
                found = _DAY.search("/" + path)
                if found and datetime.strptime(found.group(1), "%Y-%m-%d").date() < cutoff:
                    del state.files[path]
                    doomed.append(path)
        if not doomed:
            return 0
        write_manifest(fs, root, manifest)
        for path in doomed:
            with contextlib.suppress(OSError):  # already gone
                fs.delete_file(posixpath.join(root, path))
        return len(doomed)
