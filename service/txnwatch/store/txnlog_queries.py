"""Reads for the API over what the transaction-log tail stored: per-id state and the full timeline.

The timeline of an id is the newest transitions from the database (the hot window of the
stream, plus anything inferred by polling) completed, when they are not enough, by older
ones from the Parquet archive, where the stream goes once archived.
"""

from __future__ import annotations

import posixpath
from datetime import datetime
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
    return queries.TxnRow(SimpleNamespace(**fields), cluster, row.hanging if row is not None else False)  # type: ignore[arg-type]


def timeline(session: Session, cluster_id: int, cluster: str, transactional_id: str, limit: int,
             archive_uri: str | None) -> list[Any]:
    """Newest first: database rows, then archived ones older than those (deduplicated by row id)."""
    rows: list[Any] = list(queries.transitions(session, cluster_id, transactional_id, limit))
    if len(rows) >= limit or archive_uri is None:
        return rows
    seen = {r.id for r in rows}
    archived = [r for r in archived_transitions(archive_uri, cluster, transactional_id) if r.id not in seen]
    archived.sort(key=lambda r: (r.observed_at, r.id), reverse=True)
    merged = rows + archived
    merged.sort(key=lambda r: (r.observed_at, r.id), reverse=True)
    return merged[:limit]


def archived_transitions(archive_uri: str, cluster: str, transactional_id: str) -> list[SimpleNamespace]:
    """The id's transitions in the archive's ``transitions`` table of this cluster (files the manifest lists)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from txnwatch.store.archive import TABLES, open_archive, read_manifest

    try:
        fs, root = open_archive(archive_uri)
        manifest = read_manifest(fs, root)
    except (OSError, ValueError):
        return []
    prefix = f"transitions/cluster={quote(cluster, safe='')}/"
    out: list[SimpleNamespace] = []
    names = TABLES["transitions"].schema.names
    for path in sorted(manifest.table("transitions").files):
        if not path.startswith(prefix):
            continue
        try:
            table = pq.read_table(posixpath.join(root, path), filesystem=fs,
                                  filters=pc.field("transactional_id") == transactional_id)
        except (OSError, ValueError):
            continue
        for row in table.to_pylist():
            out.append(SimpleNamespace(**{n: row.get(n) for n in names}))
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
