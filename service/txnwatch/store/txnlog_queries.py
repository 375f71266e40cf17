"""Reads for the API over what the transaction-log tail stored: the full timeline of an id, and anomalies.

An id's state is one view over ``txn_ids`` whatever its source (``queries.get_transaction``).

The timeline of an id is the newest transitions from the one transition table (the hot window
of the log's stream, plus anything inferred by polling) completed, when they are not enough, by older
ones from the Parquet archive, where the stream goes once archived.  Each row comes back as the one transition
type both sources make (``core.findings.Transition``, its ``source`` the row's), so the API and the console show the
shape detection produced.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy import select
from sqlalchemy.orm import Session

from txnwatch.core.epoch import to_ms
from txnwatch.core.findings import Transition
from txnwatch.core.model import split_topic_partition
from txnwatch.core.vocabulary import TransitionSource
from txnwatch.store import models as m
from txnwatch.store import queries

#: A transition as the table or the archive holds it, with its row id: the id orders the rows of one millisecond and
#: tells a polled row in the database from its copy in the archive.  The timeline hands on the transitions alone.
_Stored = tuple[int, Transition]


def _partitions(texts: Iterable[str]) -> tuple[tuple[str, int], ...]:
    return tuple(split_topic_partition(tp) for tp in texts)


def _from_row(r: m.TransactionTransition) -> _Stored:
    return r.id, Transition(
        transactional_id=r.transactional_id, at_ms=r.at_ms, log_partition=r.log_partition, log_offset=r.log_offset,
        from_state=r.from_state, to_state=r.to_state, producer_id=r.producer_id, producer_epoch=r.producer_epoch,
        prev_producer_id=r.prev_producer_id, prev_producer_epoch=r.prev_producer_epoch, timeout_ms=r.timeout_ms,
        start_ms=r.start_ms, partitions=_partitions(m.split(r.partitions)), events=tuple(m.split(r.events)),
        duration_ms=r.duration_ms, client_transaction_version=r.client_transaction_version, detail=r.detail,
        source=TransitionSource(r.source))


def _from_archive(row: dict[str, Any]) -> _Stored:
    """A row of the archive's ``transitions`` table (schema unchanged: polled rows have no log columns, and no row
    its source or detail: a row with a log position is the log's)."""
    started = row.get("txn_started_at")
    log_offset = row.get("log_offset")
    return row["id"], Transition(
        transactional_id=row["transactional_id"], at_ms=to_ms(row["observed_at"]),
        log_partition=row.get("log_partition"), log_offset=log_offset, from_state=row.get("from_state"),
        to_state=row["to_state"], producer_id=row["producer_id"], producer_epoch=row["producer_epoch"],
        prev_producer_id=row.get("prev_producer_id"), prev_producer_epoch=row.get("prev_producer_epoch"),
        timeout_ms=row["timeout_ms"], start_ms=to_ms(started) if started is not None else None,
        partitions=_partitions(row.get("partitions") or ()), events=tuple(row.get("events") or ()),
        duration_ms=row.get("duration_ms"), client_transaction_version=row.get("client_transaction_version"),
        detail=None, source=_POLL if log_offset is None else _LOG)


_LOG, _POLL = TransitionSource.TRANSACTION_LOG, TransitionSource.POLL


def _key(r: _Stored) -> tuple[Any, ...]:
    """Log rows are one per record (partition, offset); polled rows one per row id."""
    row_id, x = r
    return ("log", x.log_partition, x.log_offset) if x.log_offset is not None else ("poll", row_id)


def timeline(session: Session, cluster_id: int, cluster: str, transactional_id: str, limit: int,
             archive_uri: str | None) -> list[Transition]:
    """Newest first: the id's rows of the one transition table (the log's hot window and what polling
    inferred), completed by older ones from the archive when those are not enough; polled rows the log's own
    rows cover are left out (:func:`without_covered_guesses`)."""
    span = _logged_span(session, cluster_id, transactional_id)
    rows: list[_Stored] = []
    fetch = limit
    while True:
        fetched = [_from_row(r) for r in queries.transitions(session, cluster_id, transactional_id, fetch)]
        rows = _without_guesses_covered(session, cluster_id, transactional_id, fetched, span)
        if len(fetched) < fetch or len(rows) >= limit:
            break
        fetch += limit  # guesses left out of a full page: read further back, so the page stays full
    if len(fetched) < limit and archive_uri is not None:
        seen = {_key(r) for r in fetched}
        rows += [r for r in _archived(archive_uri, cluster, transactional_id) if _key(r) not in seen]
        rows = _without_guesses_covered(session, cluster_id, transactional_id, rows, span)
    rows.sort(key=lambda r: (r[1].at_ms, r[1].log_offset if r[1].log_offset is not None else -1, r[0]),
              reverse=True)
    return [x for _, x in rows[:limit]]


def _logged_span(session: Session, cluster_id: int, transactional_id: str) -> tuple[int, int] | None:
    """When (epoch ms) the log's first and last stored row of the id happened (two reads along the id's index, each
    stopping at its first log row), or None when the table holds none."""
    X = m.TransactionTransition
    where = (X.cluster_id == cluster_id, *m.same_id(X.transactional_id, transactional_id),
             X.source == m.TRANSACTION_LOG, X.anomaly.is_(None))
    first = session.scalar(select(X.at_ms).where(*where).order_by(X.at_ms, X.id).limit(1))
    last = session.scalar(select(X.at_ms).where(*where).order_by(X.at_ms.desc(), X.id.desc()).limit(1))
    return None if first is None or last is None else (first, last)


def without_covered_guesses(rows: Sequence[Transition], span: tuple[int, int] | None = None) -> list[Transition]:
    """One id's transitions without the polled ones the log's own rows cover: those between
    its first and last row from the log (``span``, epoch ms, widened by the log's rows among ``rows``, such as
    archived ones), and those that name a transition one of the log's rows among ``rows`` holds (the state reached,
    the producer id and the transaction's start: :func:`transition_key`; the timeline asks the database about the
    rest, :func:`_without_guesses_covered`).

    Polls infer transitions only while the tail is not exact (store/recorder.py), for instance for the few seconds
    a restarted daemon takes to reopen the tail.  The tail then resumes at its stored positions and writes every
    record of that time itself, so a guess made meanwhile shows a commit the log's rows already show: the timeline
    counted it twice (tests/e2e/test_txnlog_history.py, the restart).  A guess newer than the log's last row is
    such a duplicate when the producer finished before the tail read again: the log's row of the same transition
    then lies before the guess, so the span alone kept it.  Guesses older than the log's first row (no tail yet,
    or a log it could not read) or newer than its last (the tail is down now) are what only polling saw, and stay
    unless the log names the same transition."""
    logged_rows = [x for x in rows if x.log_offset is not None]
    ends = [x.at_ms for x in logged_rows]
    if span is not None:
        ends += span
    if not ends:
        return list(rows)
    first, last = min(ends), max(ends)
    same = {k for x in logged_rows if (k := transition_key(x)) is not None}
    return [x for x in rows if x.log_offset is not None or not (first <= x.at_ms <= last or transition_key(x) in same)]


def transition_key(r: Transition) -> tuple[str, int, int] | None:
    """What names one transition in both sources: the state reached, the producer id and the transaction's start
    (DescribeTransactions' ``transactionStartTimeMs`` is the coordinator's ``TransactionStartTimestampMs``, which
    its log record carries); None without a start (Empty, Dead), where only the span can tell."""
    return None if r.start_ms is None else (r.to_state, r.producer_id, r.start_ms)


#: How much later than the coordinator's record a poll may see its state (clocks of two machines, a slow poll).
GUESS_SKEW_MS = 60_000


def _logged_keys(session: Session, cluster_id: int, transactional_id: str,
                 guesses: list[Transition]) -> frozenset[tuple[str, int, int]]:
    """The :func:`transition_key` of the log's rows that name the same transitions as ``guesses`` (polled rows
    the span does not cover: a few, at the timeline's edges).  One read along the id's index, bounded by the
    guesses' transaction starts and times."""
    keys = {k for g in guesses if (k := transition_key(g)) is not None}
    if not keys:
        return frozenset()
    X = m.TransactionTransition
    starts = sorted({k[2] for k in keys})
    latest = max(g.at_ms for g in guesses) + GUESS_SKEW_MS
    found = session.execute(select(X.to_state, X.producer_id, X.start_ms).where(
        X.cluster_id == cluster_id, *m.same_id(X.transactional_id, transactional_id),
        X.source == m.TRANSACTION_LOG, X.at_ms >= starts[0], X.at_ms <= latest, X.start_ms.in_(starts)))
    named = {(state, pid, start) for state, pid, start in found if start is not None}
    return frozenset(keys & named)


def _without_guesses_covered(session: Session, cluster_id: int, transactional_id: str, rows: list[_Stored],
                             span: tuple[int, int] | None) -> list[_Stored]:
    """:func:`without_covered_guesses`, then the guesses it leaves in (a few, at the edges) left out too when the
    database holds a log row of the same transition (:func:`_logged_keys`)."""
    if span is None and all(x.log_offset is None for _, x in rows):
        return rows  # the log holds nothing of the id: every guess stays
    kept = {id(x) for x in without_covered_guesses([x for _, x in rows], span)}
    left = [r for r in rows if id(r[1]) in kept]
    guesses = [x for _, x in left if x.log_offset is None]
    if not guesses:
        return left
    logged = _logged_keys(session, cluster_id, transactional_id, guesses)
    return [r for r in left if r[1].log_offset is not None or transition_key(r[1]) not in logged]


def archived_transitions(archive_uri: str, cluster: str, transactional_id: str) -> list[Transition]:
    """The id's transitions in the archive's ``transitions`` table of this cluster (:func:`_archived`)."""
    return [x for _, x in _archived(archive_uri, cluster, transactional_id)]


def _archived(archive_uri: str, cluster: str, transactional_id: str) -> list[_Stored]:
    """The id's transitions in the archive's ``transitions`` table of this cluster (files the manifest lists);
    none without pyarrow (the archive extra: the daemon said so at start, store.archive_job.say_if_unavailable)."""
    from txnwatch.core.extras import MissingExtra, require

    try:
        require("pyarrow")
    except MissingExtra:
        return []
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from txnwatch.store.archive import open_archive, read_manifest

    try:
        fs, root = open_archive(archive_uri)
        manifest = read_manifest(fs, root)
    except (OSError, ValueError):
        return []
    prefix = f"transitions/cluster={quote(cluster, safe='')}/"
    out: list[_Stored] = []
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


__all__ = ["anomalies", "archived_transitions", "m", "timeline", "transition_key", "without_covered_guesses"]
