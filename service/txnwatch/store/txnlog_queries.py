"""Reads for the API over what the transaction-log tail stored: the full timeline of an id, and anomalies.

An id's state is one view over ``txn_ids`` whatever its source (``queries.get_transaction``).

The timeline of an id is the newest transitions from the one transition table (the hot window
of the log's stream, plus anything inferred by polling) completed, when they are not enough, by older
ones from the Parquet archive, where the stream goes once archived.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session

from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.store import models as m
from txnwatch.store import queries


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One transition of an id, whichever source said it: the log's stream, a poll, or the archive."""

    id: int
    observed_at: datetime
    from_state: str | None
    to_state: str
    producer_id: int
    producer_epoch: int
    prev_producer_id: int | None
    prev_producer_epoch: int | None
    timeout_ms: int
    txn_started_at: datetime | None
    partitions: list[str]
    events: list[str]
    duration_ms: int | None
    log_partition: int | None = None
    log_offset: int | None = None
    client_transaction_version: int | None = None
    #: What the record said beyond its fields (a coming producer id rotation, unknown tags or status, raw).
    detail: str | None = None


def _from_row(r: m.TransactionTransition) -> TimelineEntry:
    observed = from_ms(r.at_ms)
    assert observed is not None
    return TimelineEntry(
        id=r.id, observed_at=observed, from_state=r.from_state, to_state=r.to_state, producer_id=r.producer_id,
        producer_epoch=r.producer_epoch, prev_producer_id=r.prev_producer_id, prev_producer_epoch=r.prev_producer_epoch,
        timeout_ms=r.timeout_ms, txn_started_at=from_ms(r.start_ms), partitions=m.split(r.partitions),
        events=m.split(r.events), duration_ms=r.duration_ms, log_partition=r.log_partition, log_offset=r.log_offset,
        client_transaction_version=r.client_transaction_version, detail=r.detail)


def _from_archive(row: dict[str, Any]) -> TimelineEntry:
    """A row of the archive's ``transitions`` table (schema unchanged: polled rows have no log columns)."""
    return TimelineEntry(
        id=row["id"], observed_at=row["observed_at"], from_state=row.get("from_state"), to_state=row["to_state"],
        producer_id=row["producer_id"], producer_epoch=row["producer_epoch"],
        prev_producer_id=row.get("prev_producer_id"), prev_producer_epoch=row.get("prev_producer_epoch"),
        timeout_ms=row["timeout_ms"], txn_started_at=row.get("txn_started_at"),
        partitions=list(row.get("partitions") or []), events=list(row.get("events") or []),
        duration_ms=row.get("duration_ms"), log_partition=row.get("log_partition"),
        log_offset=row.get("log_offset"), client_transaction_version=row.get("client_transaction_version"),
        detail=row.get("detail"))


def _key(r: TimelineEntry) -> tuple[Any, ...]:
    """Log rows are one per record (partition, offset); polled rows one per row id."""
    return ("log", r.log_partition, r.log_offset) if r.log_offset is not None else ("poll", r.id)


def timeline(session: Session, cluster_id: int, cluster: str, transactional_id: str, limit: int,
             archive_uri: str | None) -> list[TimelineEntry]:
    """Newest first: the id's rows of the one transition table (the log's hot window and what polling
    inferred), completed by older ones from the archive when those are not enough; polled rows the log's own
    rows cover are left out (:func:`without_covered_guesses`)."""
    span = _logged_span(session, cluster_id, transactional_id)
    rows: list[TimelineEntry] = []
    fetch = limit
    while True:
        fetched = [_from_row(r) for r in queries.transitions(session, cluster_id, transactional_id, fetch)]
        rows = _without_guesses_covered(session, cluster_id, transactional_id, fetched, span)
        if len(fetched) < fetch or len(rows) >= limit:
            break
        fetch += limit  # guesses left out of a full page: read further back, so the page stays full
    if len(fetched) < limit and archive_uri is not None:
        seen = {_key(r) for r in fetched}
        rows += [r for r in archived_transitions(archive_uri, cluster, transactional_id) if _key(r) not in seen]
        rows = _without_guesses_covered(session, cluster_id, transactional_id, rows, span)
    rows.sort(key=lambda r: (r.observed_at, r.log_offset if r.log_offset is not None else -1, r.id), reverse=True)
    return rows[:limit]


def _logged_span(session: Session, cluster_id: int, transactional_id: str) -> tuple[datetime, datetime] | None:
    """When the log's first and last stored row of the id happened (two reads along the id's index, each stopping
    at its first log row), or None when the table holds none."""
    X = m.TransactionTransition
    where = (X.cluster_id == cluster_id, *m.same_id(X.transactional_id, transactional_id),
             X.source == m.TRANSACTION_LOG, X.anomaly.is_(None))
    first = session.scalar(select(X.at_ms).where(*where).order_by(X.at_ms, X.id).limit(1))
    last = session.scalar(select(X.at_ms).where(*where).order_by(X.at_ms.desc(), X.id.desc()).limit(1))
    first_at, last_at = from_ms(first), from_ms(last)
    return None if first_at is None or last_at is None else (first_at, last_at)


def without_covered_guesses(rows: list[TimelineEntry],
                            span: tuple[datetime, datetime] | None = None) -> list[TimelineEntry]:
    """One id's rows without the polled ones the log's own rows cover: those between its first and last row from the
    log (``span``, widened by the log's rows among ``rows``, such as archived ones), and those that name a transition
    one of the log's rows among ``rows`` holds (the state reached, the producer id and the transaction's start:
    :func:`transition_key`; the timeline asks the database about the rest, :func:`_without_guesses_covered`).

    Polls infer transitions only while the tail is not exact (store/recorder.py), for instance for the few seconds
    a restarted daemon takes to reopen the tail.  The tail then resumes at its stored positions and writes every
    record of that time itself, so a guess made meanwhile shows a commit the log's rows already show: the timeline
    counted it twice (tests/e2e/test_txnlog_history.py, the restart).  A guess newer than the log's last row is
    such a duplicate when the producer finished before the tail read again: the log's row of the same transition
    then lies before the guess, so the span alone kept it.  Guesses older than the log's first row (no tail yet,
    or a log it could not read) or newer than its last (the tail is down now) are what only polling saw, and stay
    unless the log names the same transition."""
    logged_rows = [r for r in rows if r.log_offset is not None]
    ends = [r.observed_at for r in logged_rows]
    if span is not None:
        ends += span
    if not ends:
        return rows
    first, last = min(ends), max(ends)
    same = {k for r in logged_rows if (k := transition_key(r)) is not None}
    return [r for r in rows if r.log_offset is not None
            or not (first <= r.observed_at <= last or transition_key(r) in same)]


def transition_key(r: TimelineEntry) -> tuple[str, int, int] | None:
    """What names one transition in both sources: the state reached, the producer id and the transaction's start
    (DescribeTransactions' ``transactionStartTimeMs`` is the coordinator's ``TransactionStartTimestampMs``, which
    its log record carries); None without a start (Empty, Dead), where only the span can tell."""
    return None if r.txn_started_at is None else (r.to_state, r.producer_id, to_ms(r.txn_started_at))


#: How much later than the coordinator's record a poll may see its state (clocks of two machines, a slow poll).
GUESS_SKEW_MS = 60_000


def _logged_keys(session: Session, cluster_id: int, transactional_id: str,
                 guesses: list[TimelineEntry]) -> frozenset[tuple[str, int, int]]:
    """The :func:`transition_key` of the log's rows that name the same transitions as ``guesses`` (polled rows
    the span does not cover: a few, at the timeline's edges).  One read along the id's index, bounded by the
    guesses' transaction starts and times."""
    keys = {k for g in guesses if (k := transition_key(g)) is not None}
    if not keys:
        return frozenset()
    X = m.TransactionTransition
    starts = sorted({k[2] for k in keys})
    latest = max(to_ms(g.observed_at) for g in guesses) + GUESS_SKEW_MS
    found = session.execute(select(X.to_state, X.producer_id, X.start_ms).where(
        X.cluster_id == cluster_id, *m.same_id(X.transactional_id, transactional_id),
        X.source == m.TRANSACTION_LOG, X.at_ms >= starts[0], X.at_ms <= latest, X.start_ms.in_(starts)))
    named = {(state, pid, start) for state, pid, start in found if start is not None}
    return frozenset(keys & named)


def _without_guesses_covered(session: Session, cluster_id: int, transactional_id: str, rows: list[TimelineEntry],
                             span: tuple[datetime, datetime] | None) -> list[TimelineEntry]:
    """:func:`without_covered_guesses`, then the guesses it leaves in (a few, at the edges) left out too when the
    database holds a log row of the same transition (:func:`_logged_keys`)."""
    if span is None and all(r.log_offset is None for r in rows):
        return rows  # the log holds nothing of the id: every guess stays
    left = without_covered_guesses(rows, span)
    guesses = [r for r in left if r.log_offset is None]
    if not guesses:
        return left
    logged = _logged_keys(session, cluster_id, transactional_id, guesses)
    return [r for r in left if r.log_offset is not None or transition_key(r) not in logged]


def archived_transitions(archive_uri: str, cluster: str, transactional_id: str) -> list[TimelineEntry]:
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
    out: list[TimelineEntry] = []
    for path in sorted(manifest.table("transitions").files):
        if not path.startswith(prefix):
            continue
        try:
            table = pq.read_table(posixpath.join(root, path), filesystem=fs,
                                  filters=pc.field("transactional_id") == transactional_id)
        except (OSError, ValueError):
            continue
        for row in table.to_pylist():
            out.append(_from_archive(row))
    return out


def anomalies(session: Session, cluster_id: int, since: datetime | None, kinds: tuple[str, ...],
              limit: int) -> list[m.TransactionTransition]:
    """The log's anomalies (rows of the transition table with ``anomaly`` set), newest first."""
    A = m.TransactionTransition
    stmt = select(A).where(A.cluster_id == cluster_id, A.anomaly.is_not(None))
    if since is not None:
        stmt = stmt.where(A.at_ms >= to_ms(since))
    if kinds:
        stmt = stmt.where(A.anomaly.in_(kinds))
    return list(session.scalars(stmt.order_by(A.at_ms.desc(), A.id.desc()).limit(limit)))


__all__ = ["TimelineEntry", "anomalies", "archived_transitions", "m", "timeline", "transition_key", "without_covered_guesses"]
