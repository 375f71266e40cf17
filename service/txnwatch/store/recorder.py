"""Writes each poll's snapshot and findings to the database, surviving database outages.

A poll becomes one :class:`PollRecord` of plain rows (built without touching the DB),
queued in a bounded buffer and written in one transaction.  When the database is
down, records wait in memory up to ``max_buffered`` polls and are written in order
when it returns; what falls off the end is counted (metric) and logged, never
silently lost.  Every write is an idempotent upsert on natural keys, so replaying a
record after a half-failed flush never duplicates an episode.

The latest state of every transactional id as polls see it (the ``poll`` rows of ``txn_ids``) is written as a difference:
the rows that changed since the database last saw them are upserted in one statement, and
one UPDATE stamps ``last_seen_at`` on all the others.  One upsert per id and poll cost
seconds of the collector's thread at 20,000 ids (issue 18: a poll inside the daemon ran
far slower than alone because the next poll started while this write and the renders it
triggered were still running).  The difference is taken against what the database holds,
read in the same transaction, not against a copy in memory, so another replica's writes,
a restored database or a dropped buffer can never leave a row stale.

Partition offsets are written when they changed or once per heartbeat interval (store/offset_pictures.py), so an
idle cluster's unchanged partitions cost no rows; the newest written picture always equals the latest poll's.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Table, select, true, update
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.core.epoch import from_ms, to_ms
from txnwatch.core.findings import Findings
from txnwatch.core.model import ClusterSnapshot
from txnwatch.store import models as m
from txnwatch.store.clusters import register_clusters
from txnwatch.store.findings import EpisodeSync, findings_rows, sync_episodes
from txnwatch.store.health import StoreHealth
from txnwatch.store.id_lists import not_among
from txnwatch.store.isolation import Rejections, refused_data
from txnwatch.store.lag_sampling import LagSampling
from txnwatch.store.offset_pictures import PICTURE_COLUMNS, OffsetPictures, Picture, picture
from txnwatch.store.offset_pictures import rows as picture_rows
from txnwatch.store.row_inserts import insert_dicts, insert_tuples, writes_tuples
from txnwatch.store.upsert import insert_for

log = logging.getLogger(__name__)


@dataclass
class PollRecord:
    """Everything one poll adds to the history; ``cluster_id`` is filled in at write time."""

    cluster: str
    at: datetime
    ok: bool
    duration_ms: int
    error: str | None
    error_count: int = 0
    inserts: list[tuple[Table, list[dict[str, Any]]]] = field(default_factory=list)
    states: list[dict[str, Any]] = field(default_factory=list)
    episodes: list[EpisodeSync] = field(default_factory=list)
    txn_ids_seen: frozenset[str] | None = None
    #: The cluster's transaction-log tail was exact when the poll was built: its rows of txn_ids win.
    exact: bool = False
    #: The partition offsets of the poll, written only if they changed or their heartbeat is due
    #: (store/offset_pictures.py): decided at write time, against what was committed.
    offsets_picture: Picture = ()
    #: Set by a successful write: the offsets went into the database with it.
    offsets_written: bool = False


#: The columns of an id's poll row that a poll can change; ``first_seen_at``/``last_seen_at``/``gone_at`` are
#: bookkeeping, written by the upsert and the two bulk UPDATEs.
STATE_COLUMNS = ("coordinator_id", "state", "producer_id", "producer_epoch", "timeout_ms", "txn_started_at",
                 "partitions")


def state_rows(snapshot: ClusterSnapshot, at: datetime) -> list[dict[str, Any]]:
    """The ids' poll rows of the snapshot, whatever detection found."""
    return [
        dict(source=m.POLL, transactional_id=t.transactional_id, id_hash=m.id_hash(t.transactional_id),
             coordinator_id=t.coordinator_id, state=t.state.value,
             producer_id=t.producer_id, producer_epoch=t.producer_epoch, timeout_ms=t.timeout_ms,
             txn_started_at=from_ms(t.start_time_ms), partitions=sorted(str(tp) for tp in t.partitions),
             first_seen_at=at, last_seen_at=at, gone_at=None)
        for t in snapshot.transactions.values()
    ]


class Recorder:
    """The store's collector sink.  Thread-safe: cluster jobs call it concurrently."""

    def __init__(self, sessions: sessionmaker[Session], clusters: Mapping[str, str], health: StoreHealth | None = None,
                 max_buffered: int = 1000, exact_history: Callable[[str], bool] = lambda cluster: False,
                 lag_sampling: LagSampling | None = None, offset_pictures: OffsetPictures | None = None) -> None:
        """``clusters``: name → bootstrap servers of every configured cluster, registered together by :meth:`start`.
        ``exact_history(cluster)``: the transaction-log tail writes that cluster's transitions (exact mode).
        ``lag_sampling``: which polls write lag rows (default: every poll).
        ``offset_pictures``: which polls write partition offsets (default: every poll)."""
        self._sessions = sessions
        self._lag_sampling = lag_sampling or LagSampling()
        self._offset_pictures = offset_pictures or OffsetPictures()
        self._exact_history = exact_history
        self._clusters = dict(clusters)
        self.health = health or StoreHealth()
        self._buffer: deque[PollRecord] = deque()
        self._max_buffered = max_buffered
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._cluster_ids: dict[str, int] = {}
        self._rejections = Rejections(self.health)
        self._refused: dict[str, dict[str, str]] = {}  # kind -> {tenant string: reason}, see _set_aside_known

    def start(self) -> None:
        """Registers every configured cluster at once, at start; if the database is down, the first flush does it."""
        try:
            self._register()
        except Exception as exc:
            log.warning("cannot register the clusters in the database yet (%s); retrying with the first write",
                        str(exc).splitlines()[0] if str(exc) else type(exc).__name__)

    def _register(self) -> None:
        with self._sessions.begin() as session:
            ids = register_clusters(session, self._clusters, datetime.now(timezone.utc))
        self._cluster_ids = ids

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def on_poll(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None, now_ms: int) -> None:
        self.enqueue(self.build(cluster, snapshot, findings, error, now_ms))
        self.flush()

    def build(self, cluster: str, snapshot: ClusterSnapshot | None, findings: Findings | None, error: str | None,
              now_ms: int) -> PollRecord:
        at = from_ms(snapshot.taken_at_ms if snapshot else now_ms)
        assert at is not None
        record = PollRecord(cluster=cluster, at=at,
                            ok=snapshot is not None, duration_ms=snapshot.duration_ms if snapshot else 0,
                            error=error, error_count=len(snapshot.errors) if snapshot else 0)
        if snapshot is not None:
            record.offsets_picture = picture(snapshot)
            record.states.extend(state_rows(snapshot, at))
            if snapshot.listing_complete and not snapshot.unreachable_coordinators:
                record.txn_ids_seen = frozenset(snapshot.transactions)
        if findings is not None and snapshot is not None and not self._lag_sampling.due(cluster, snapshot.taken_at_ms):
            findings = dataclasses.replace(findings, lags=())  # no rows built for a poll that writes none
        inserts, episodes = findings_rows(snapshot, findings, at)
        record.exact = self._exact_history(cluster)
        if record.exact:
            # The transaction log tail writes this cluster's exact transitions; guesses between polls would
            # only duplicate them.
            inserts = [(table, rows) for table, rows in inserts if table is not m.table(m.TransactionTransition)]
        record.inserts.extend(inserts)
        record.episodes.extend(episodes)
        return record

    def enqueue(self, record: PollRecord) -> None:
        with self._lock:
            self._buffer.append(record)
            while len(self._buffer) > self._max_buffered:
                dropped = self._buffer.popleft()
                self.health.dropped()
                log.error("database unavailable for too long: dropped the buffered poll of %s at %s "
                          "(buffer bound %d polls)", dropped.cluster, dropped.at.isoformat(), self._max_buffered)

    def flush(self) -> bool:
        """Write buffered records oldest first; stops at the first failure and keeps the rest.

        A record the database refuses is written again object by object (:meth:`_write_isolated`): a tenant's
        id the database cannot hold must cost that id's rows, not every tenant's history from then on (issue 23:
        the same poisoned record was retried forever and nothing else was recorded again)."""
        with self._flush_lock:
            while self._buffer:
                record = self._buffer[0]
                self._set_aside_known(record)
                try:
                    try:
                        with self._sessions.begin() as session:
                            self._write(session, record)
                    except DBAPIError as exc:
                        if not refused_data(exc):
                            raise
                        with self._sessions.begin() as session:
                            self._write_isolated(session, record)
                except Exception as exc:
                    record.offsets_written = False
                    reason = f"{exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                    if self.health.error is None:
                        log.error("database write failed (%s); buffering polls in memory (%d buffered)",
                                  reason, len(self._buffer))
                    self.health.write_failed(reason)
                    self._cluster_ids = {}  # the database may come back restored: register again
                    self._offset_pictures.forget()
                    return False
                if record.offsets_written:
                    self._offset_pictures.written(record.cluster, record.offsets_picture, to_ms(record.at))
                with self._lock:
                    if self._buffer and self._buffer[0] is record:
                        self._buffer.popleft()
            if self.health.error is not None:
                log.info("database writes recovered")
            self.health.write_succeeded()
            return True

    def _set_aside_known(self, record: PollRecord) -> None:
        """Rows carrying a tenant string the database refused before are set aside (and counted) before the next
        record's first attempt: a refused id comes back every poll, and finding it again by halving would cost
        every such poll its write several times over."""
        if not self._refused:
            return
        for i, (table, rows) in enumerate(record.inserts):
            known = self._refused.get(table.name)
            if known and rows:
                kept = [r for r in rows if _tenant_key(table.name, r) not in known]
                for r in rows:
                    if (reason := known.get(_tenant_key(table.name, r) or "")) is not None:
                        self.health.rejected(table.name, reason)
                record.inserts[i] = (table, kept)
        kind = m.TransactionState.__tablename__
        known = self._refused.get(kind)
        if known:
            refused = frozenset(t for t in (r["transactional_id"] for r in record.states) if t in known)
            for tid in refused:
                self.health.rejected(kind, known[tid])
            if refused:
                record.states = [r for r in record.states if r["transactional_id"] not in refused]
                if record.txn_ids_seen is not None:
                    record.txn_ids_seen = record.txn_ids_seen - refused

    def _remember(self, kind: str, values: list[tuple[str | None, str]]) -> None:
        known = self._refused.setdefault(kind, {})
        if len(known) + len(values) > REFUSED_REMEMBERED:
            known.clear()  # bounded: a flood of distinct bad ids costs halving again, never memory
        known.update((value, reason) for value, reason in values if value is not None)

    def _write(self, session: Session, record: PollRecord) -> None:
        cluster_id = self._write_poll(session, record)
        self._write_offsets(session, cluster_id, record)
        for table, rows in record.inserts:
            if rows:
                _insert_rows(session, table, cluster_id, rows)
        for episodes in record.episodes:
            sync_episodes(session, cluster_id, episodes, record.at)
        _write_states(session, cluster_id, record)

    def _write_poll(self, session: Session, record: PollRecord) -> int:
        """The cluster's row and the poll's own row: txnwatch's strings only, never a tenant's."""
        if record.cluster not in self._cluster_ids:
            self._cluster_ids = register_clusters(session, self._clusters, record.at)
        cluster_id = self._cluster_ids[record.cluster]
        values: dict[str, Any] = dict(up=record.ok, last_poll_at=record.at, last_error=record.error)
        if record.ok:
            values["last_success_at"] = record.at
        session.execute(update(m.Cluster).where(m.Cluster.id == cluster_id).values(**values))
        session.execute(m.table(m.Poll).insert().values(
            cluster_id=cluster_id, started_at=record.at, duration_ms=record.duration_ms, ok=record.ok,
            error_count=record.error_count, error=record.error))
        return cluster_id

    def _write_offsets(self, session: Session, cluster_id: int, record: PollRecord) -> None:
        """The poll's partition offsets, if they changed since the last committed picture or their heartbeat is due."""
        record.offsets_written = False
        if record.offsets_picture and self._offset_pictures.due(record.cluster, record.offsets_picture,
                                                                to_ms(record.at)):
            table = m.table(m.PartitionOffsetSample)
            connection = session.connection()
            if connection.dialect.name == "sqlite":  # the picture's tuples as they are (store/row_inserts.py)
                insert_tuples(connection, table, PICTURE_COLUMNS, record.offsets_picture,
                              {"cluster_id": cluster_id, "sampled_at": record.at})
            else:
                _insert_rows(session, table, cluster_id, picture_rows(record.offsets_picture, record.at))
            record.offsets_written = True

    def _write_isolated(self, session: Session, record: PollRecord) -> None:
        """The record again, each group of rows in a SAVEPOINT, a refused group halved until the refused rows
        are alone: k bad rows among n cost O(k log n) statements, and only on a poll that has them.  What is
        refused is counted (``txnwatch_store_rejected_objects_total``) and logged at most once a minute per
        kind; the rest commits in this one transaction, so the record is written once, never half twice."""
        cluster_id = self._write_poll(session, record)
        self._write_offsets(session, cluster_id, record)  # txnwatch's and Kafka's strings only: topic names
        for table, rows in record.inserts:
            if rows:
                def insert(part: list[Any], table: Table = table) -> None:
                    _insert_rows(session, table, cluster_id, part)
                refused_rows = self._rejections.isolate(session, table.name, rows, insert)
                self._remember(table.name, [(_tenant_key(table.name, r), reason) for r, reason in refused_rows])
        for sync in record.episodes:
            def try_sync(part: list[Any], sync: EpisodeSync = sync) -> None:
                sync_episodes(session, cluster_id, EpisodeSync(sync.model, {k: sync.active[k] for k in part},
                                                               sync.undecided | (sync.active.keys() - set(part))),
                              record.at)
            refused = {key for key, _ in self._rejections.isolate(session, sync.model.__tablename__,
                                                                  list(sync.active), try_sync, check_only=True)}
            # Refused incidents are left undecided: their open episode (if any) is neither refreshed nor closed.
            sync_episodes(session, cluster_id, EpisodeSync(
                sync.model, {k: v for k, v in sync.active.items() if k not in refused}, sync.undecided | refused),
                record.at)

        def try_states(part: list[Any]) -> None:
            wanted = set(part)
            _upsert_many(session, m.table(m.TransactionState), cluster_id,
                         [r for r in record.states if r["transactional_id"] in wanted])
        kind = m.TransactionState.__tablename__
        refused_states = self._rejections.isolate(session, kind, [row["transactional_id"] for row in record.states],
                                                  try_states, check_only=True)
        self._remember(kind, list(refused_states))
        refused_ids = frozenset(tid for tid, _ in refused_states)
        record.states = [r for r in record.states if r["transactional_id"] not in refused_ids]
        if record.txn_ids_seen is not None and refused_ids:
            record.txn_ids_seen = record.txn_ids_seen - refused_ids  # a refused id cannot even be a parameter
        _write_states(session, cluster_id, record)


#: Tenant strings the database refused, remembered per kind (bounded).
REFUSED_REMEMBERED = 10_000


def _tenant_key(table: str, row: dict[str, Any]) -> str | None:
    """The tenant's string a row of ``table`` carries (what the database may refuse)."""
    return row.get("group_id") if table == m.ConsumerLagSample.__tablename__ else row.get("transactional_id")


#: Rows per INSERT executemany.  A poll that writes every lag row at once (the first poll, each lag sample:
#: 12,015 rows on issue 25's lab) built them all as parameter dicts, and SQLAlchemy its bound values beside them:
#: a transient of ~14 MB of small objects, whose emptied pools pymalloc keeps resident inside its arenas
#: (docs/performance.md, "Where the daemon's memory is").  In chunks the transient is one chunk's; the rows,
#: their order and the transaction are the same (PostgreSQL's insertmanyvalues batches 1,000 rows anyway).
INSERT_CHUNK_ROWS = 1_000


def _insert_rows(session: Session, table: Table, cluster_id: int, rows: list[dict[str, Any]]) -> None:
    """On SQLite plain tuples in multi-row statements where that is the same write (store/row_inserts.py), else
    Core's executemany."""
    insert = table.insert()
    connection = session.connection()
    extra = {"cluster_id": cluster_id}
    for start in range(0, len(rows), INSERT_CHUNK_ROWS):
        chunk = rows[start:start + INSERT_CHUNK_ROWS]
        if writes_tuples(connection, table, chunk, extra):
            insert_dicts(connection, table, chunk, extra)
        else:
            session.execute(insert, [dict(row, cluster_id=cluster_id) for row in chunk])


def _write_states(session: Session, cluster_id: int, record: PollRecord) -> None:
    """The ids' poll rows after this poll: changed rows upserted, ids no longer listed marked gone, the rest stamped seen.

    Only a complete listing (every broker answered ListTransactions) can say an id is gone; without one,
    every id of the snapshot is upserted and no other row is touched, as before the difference existed.
    """
    table = m.table(m.TransactionState)
    if not record.exact:
        # Polling has taken over (the tail is not exact): the log's rows, as the tail left them, stop winning
        # until the tail writes them again.  One statement; a no-op once done.
        session.execute(update(table).where(table.c.cluster_id == cluster_id, table.c.source == m.TRANSACTION_LOG,
                                            table.c.superseded.is_(False)).values(superseded=True))
    if record.txn_ids_seen is None:
        _upsert_many(session, table, cluster_id, record.states)
        return
    held = {row[0]: tuple(row)[1:] for row in session.execute(
        select(table.c.transactional_id, *(table.c[c] for c in STATE_COLUMNS))
        .where(table.c.cluster_id == cluster_id, table.c.source == m.POLL, table.c.gone_at.is_(None)))}
    changed = [row for row in record.states
               if held.get(row["transactional_id"]) != tuple(row[c] for c in STATE_COLUMNS)]
    _upsert_many(session, table, cluster_id, changed)
    not_gone = (table.c.cluster_id == cluster_id, table.c.source == m.POLL, table.c.gone_at.is_(None))
    listed = (not_among(session.get_bind().dialect.name, table.c.transactional_id, record.txn_ids_seen)
              if record.txn_ids_seen else true())
    session.execute(update(table).where(*not_gone, listed).values(gone_at=record.at))
    # Every row still not gone was listed by this poll: one statement instead of one upsert per id.
    session.execute(update(table).where(*not_gone, table.c.last_seen_at < record.at).values(last_seen_at=record.at))


def _upsert_many(session: Session, table: Table, cluster_id: int, rows: list[dict[str, Any]]) -> None:
    """Insert-or-update the ids' poll rows in one executemany; ``first_seen_at`` keeps its first value."""
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    insert = insert_for(dialect, table)
    keys = ("cluster_id", "id_hash", "source")
    changes = {k: insert.excluded[k] for k in rows[0] if k not in keys and k not in ("first_seen_at",
                                                                                       "transactional_id")}
    session.execute(insert.on_conflict_do_update(index_elements=list(keys), set_=changes),
                    [dict(row, cluster_id=cluster_id) for row in rows])
