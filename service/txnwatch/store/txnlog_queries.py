"""Reads for the API over what the transaction-log tail stored: per-id state and the full timeline.

The timeline of an id is the newest transitions from the database (the hot window of the
stream, plus anything inferred by polling) completed, when they are not enough, by older
ones from the Parquet archive, where the stream goes once archived.
"""

from __future__ import annotations

import posixpath
from datetime import datetime, timezone
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session

from txnwatch.store import models as m
from txnwatch.store import queries
from txnwatch.store import txnlog_models as t


def logged_id(session: Session, cluster_id: int, transactional_id: str) -> t.TxnLogId | None:
    return session.scalar(select(t.TxnLogId).where(t.TxnLogId.cluster_id == cluster_id,
                                                   t.TxnLogId.transactional_id == transactional_id))


def with_log_state(row: queries.TxnRow | None, logged: t.TxnLogId | None, cluster: str) -> queries.TxnRow:
    """The summary from polling, with state, producer id/epoch and partitions from the log when it has them:
    the log is written on every transition, a poll only samples."""
    if logged is None:
        assert row is not None
        return row
    base = row.txn if row is not None else None
    fields = dict(
        transactional_id=logged.transactional_id, state=logged.state, producer_id=logged.producer_id,
        producer_epoch=logged.producer_epoch, timeout_ms=logged.timeout_ms, txn_started_at=logged.txn_started_at,
        partitions=list(logged.partitions or []),
        coordinator_id=getattr(base, "coordinator_id", None),
        first_seen_at=getattr(base, "first_seen_at", None) or logged.last_update_at,
        last_seen_at=max(filter(None, (getattr(base, "last_seen_at", None), logged.last_update_at))),
        gone_at=getattr(base, "gone_at", None))
    return queries.TxnRow(SimpleNamespace(**fields), cluster, row.hanging if row is not None else False)  # type: ignore[arg-type]  # TxnRow reads attributes; a namespace of the same fields stands in for the row


_FIELDS = ("id", "observed_at", "from_state", "to_state", "producer_id", "producer_epoch", "prev_producer_id",
           "prev_producer_epoch", "timeout_ms", "txn_started_at", "partitions", "events", "duration_ms",
           "log_partition", "log_offset", "client_transaction_version")


def _ts(ms: int | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


def _from_stream(r: t.TxnLogStream) -> SimpleNamespace:
    return SimpleNamespace(
        id=r.id, observed_at=_ts(r.at_ms), from_state=r.from_state, to_state=r.to_state, producer_id=r.producer_id,
        producer_epoch=r.producer_epoch, prev_producer_id=r.prev_producer_id, prev_producer_epoch=r.prev_producer_epoch,
        timeout_ms=r.timeout_ms, txn_started_at=_ts(r.start_ms), partitions=r.partitions.split(",") if r.partitions
        else [], events=r.events.split(",") if r.events else [], duration_ms=r.duration_ms,
        log_partition=r.log_partition, log_offset=r.log_offset, client_transaction_version=r.client_transaction_version)


def _from_polled(r: m.TransactionTransition) -> SimpleNamespace:
    return SimpleNamespace(**{f: getattr(r, f, None) for f in _FIELDS})


def _key(r: SimpleNamespace) -> tuple[Any, ...]:
    """Log rows are one per record (partition, offset); polled rows one per row id."""
    return ("log", r.log_partition, r.log_offset) if r.log_offset is not None else ("poll", r.id)


def timeline(session: Session, cluster_id: int, cluster: str, transactional_id: str, limit: int,
             archive_uri: str | None) -> list[SimpleNamespace]:
    """Newest first: the staged log stream and polled transitions from the database, completed by older
    ones from the archive when those are not enough."""
    S = t.TxnLogStream
    rows = [_from_stream(r) for r in session.scalars(
        select(S).where(S.cluster_id == cluster_id, S.transactional_id == transactional_id)
        .order_by(S.at_ms.desc(), S.id.desc()).limit(limit))]
    rows += [_from_polled(r) for r in queries.transitions(session, cluster_id, transactional_id, limit)]
    if len(rows) < limit and archive_uri is not None:
        seen = {_key(r) for r in rows}
        rows += [r for r in archived_transitions(archive_uri, cluster, transactional_id) if _key(r) not in seen]
    rows.sort(key=lambda r: (r.observed_at, r.log_offset if r.log_offset is not None else -1, r.id), reverse=True)
    return rows[:limit]


def archived_transitions(archive_uri: str, cluster: str, transactional_id: str) -> list[SimpleNamespace]:
    """The id's transitions in the archive's ``transitions`` table of this cluster (files the manifest lists)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from txnwatch.store.archive import open_archive, read_manifest

    try:
        fs, root = open_archive(archive_uri)
        manifest = read_manifest(fs, root)
    except (OSError, ValueError):
        return []
    prefix = f"transitions/cluster={quote(cluster, safe='')}/"
    out: list[SimpleNamespace] = []
    for path in sorted(manifest.table("transitions").files):
        if not path.startswith(prefix):
            continue
        try:
            table = pq.read_table(posixpath.join(root, path), filesystem=fs,
                                  filters=pc.field("transactional_id") == transactional_id)
        except (OSError, ValueError):
            continue
        for row in table.to_pylist():
            out.append(SimpleNamespace(**{f: row.get(f) for f in _FIELDS}))
    return out


def anomalies(session: Session, cluster_id: int, since: datetime | None, kinds: tuple[str, ...],
              limit: int) -> list[t.TxnLogAnomaly]:
    A = t.TxnLogAnomaly
    stmt = select(A).where(A.cluster_id == cluster_id)
    if since is not None:
        stmt = stmt.where(A.at >= since)
    if kinds:
        stmt = stmt.where(A.kind.in_(kinds))
    return list(session.scalars(stmt.order_by(A.at.desc(), A.id.desc()).limit(limit)))


__all__ = ["anomalies", "archived_transitions", "logged_id", "m", "timeline", "with_log_state"]
