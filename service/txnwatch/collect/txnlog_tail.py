"""The transaction-log tail as a service: one thread per cluster, on the leader only.

Each thread reads ``__transaction_state`` (kafka/txnlog.py), applies the records with
the pure :func:`txnwatch.detect.txnlog.apply`, and commits the result together with
the new log positions in one database transaction (store/txnlog.py).  Fetches are
applied as they arrive but committed together, merged so that an id changed many times
costs one row: one transaction per fetch capped the tail far below a busy log.  A quiet
log commits when a read comes back empty (drained), about once per fetch wait; a busy log
(every read brings records, ``commit_busy_records`` or more waiting) commits every
``commit_busy_s`` once the previous commit has landed, and any log at the latest every second
(or when ``commit_max_records`` wait).
Each commit runs on a writer thread (collect/txnlog_writer.py) while the tail reads and
applies the next fetches: one commit in flight at most, the next one waits for it, and
its outcome is collected on the tail's thread, so a commit's positions are counted as
stored only once it committed, with its rows in the same transaction.
A failed write drops the in-memory state, the uncommitted fetches and the consumer: the
next attempt reloads them from the database, so what was committed is the only truth
and nothing is counted twice.

Where the log cannot be read (ACLs deny Describe or Read on the topic, the topic does
not exist yet) the cluster's history comes from polling, the view says ``polling`` and
why, and the log is tried again every ``retry_seconds``.  A follower replica does not
tail; a new leader resumes at the positions the old one committed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from operator import attrgetter
from typing import Protocol

from sqlalchemy import Connection, Engine, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.collect.txnlog_writer import CommitWriter
from txnwatch.core import threadnames
from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord
from txnwatch.core.pollwindow import PROCESS, PollWindow
from txnwatch.core.views import EXACT, KEPT_GAPS, POLLING, HistoryGap, HistoryView, LatestState
from txnwatch.core.vocabulary import STUCK_PREPARE
from txnwatch.detect import txnlog as detect_txnlog
from txnwatch.detect import txnlog_gaps
from txnwatch.detect.settings import DetectionSettings
from txnwatch.store import models as m
from txnwatch.store import txnlog as store_txnlog
from txnwatch.store.health import StoreHealth
from txnwatch.store.isolation import Rejections, refused_data

log = logging.getLogger(__name__)

CHECK_EVERY_S = 5.0
DB_RETRY_S = 5.0
COMMIT_EVERY_S = 1.0
"""Applied batches are stored together at most this long after the first of them, even while the previous
commit is still running (then the tail waits for it): one database transaction per fetch capped the tail at
~10k records/s on SQLite, far below a busy cluster's log."""
COMMIT_BUSY_S = 0.25
"""While records keep coming, they are committed this long after the first of them was applied, if the writer
is free (the previous commit landed; else at its next step, or at COMMIT_EVERY_S, waiting for it).  With one
commit a second a busy log's records were stored 1.1 s after their append at the median and 2.0 s at p99 (10,000
TV2 transactions/s, benchmarks/txnlog_replay.py, issue 25): each waited for the second to end, then for a
second's worth of rows.  A quiet log never waits for it: it commits when a read comes back empty.
``transaction_log.busy_commit_ms``."""
IDLE_READ_FACTOR = 4
"""With nothing applied and nothing in flight, a read waits this many times ``read_timeout_ms`` (2 s by default)
for records before the step comes round again.  Each empty step costs the reading thread a kafka-python poll, the
positions, the gap watch and a publication: at 0.5 s an idle tail spent ~0.12 CPU-s a minute on them on the peers
lab (issue 25).  Records still come back as soon as a fetch brings them, and once some are applied the reads go
back to ``read_timeout_ms``, so their commit and its publication are not delayed; only a lease change or a stop is
seen up to the longer wait later."""
COMMIT_BUSY_RECORDS = 250
"""...and only once at least this many records wait (1,000 records/s over ``commit_busy_s``): the early commit is
for a busy log, whose rows would otherwise wait for a second's worth.  On the peers lab's trickle (three
producers, tens of records a second) almost every read brought records, so the busy interval handed off ~1.3
commits a second instead of one, each paying the transaction's fixed cost (the positions, the WAL sync) for a few
rows.  Committing once a second took the writer thread from 0.17 to 0.14 CPU-s a minute (issue 25).  A trickle commits at
``COMMIT_EVERY_S`` or when drained, as it did before the busy interval; 30,000 records/s reach this within ~10 ms."""
COMMIT_MAX_RECORDS = 50_000
"""...or as soon as this many records wait, which bounds memory and the size of one transaction."""


class Tail(Protocol):
    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]: ...
    def positions(self) -> dict[int, int]: ...
    def end_offsets(self) -> dict[int, int]: ...
    def close(self) -> None: ...


@dataclass(frozen=True)
class _InFlight:
    """A commit handed to the writer: what becomes the tail's committed truth once it commits."""

    state: detect_txnlog.TxnLogState
    counts: dict[str, int]
    moved: dict[int, int]
    last_ms: int
    problems: int
    gaps: list[HistoryGap]


OpenTail = Callable[[Mapping[int, int]], Tail]
"""positions -> a tail reading from there (or from the configured start where none is stored)."""


def cluster_id_for(sessions: sessionmaker[Session], name: str) -> int:
    """The cluster's row id, registered by the store at start (with every configured cluster, in one transaction).

    If the store could not register yet (database down at start), this raises and the tail retries later.
    """
    with sessions() as session:
        found = session.scalar(select(m.Cluster.id).where(m.Cluster.name == name))
    if found is None:
        raise LookupError(f"cluster {name!r} is not registered yet; the store registers it with its first write")
    return found


class ClusterTail:
    """Owns one cluster's tail, detector state and committed counters; only its thread touches them.

    ``leading()`` is this replica's term for the cluster (a lease epoch; falsy when it does not
    hold it): a new term reloads everything from the database, and ``fence(session)`` makes each
    write refuse to commit unless the term still holds, so two replicas never both advance the log.
    """

    def __init__(self, name: str, bootstrap_servers: str, open_tail: OpenTail, sessions: sessionmaker[Session],
                 state: LatestState, *, leading: Callable[[], object] = lambda: True,
                 fence: Callable[[Session | Connection], None] = lambda session: None,
                 detection: DetectionSettings = DetectionSettings(), retry_s: float = 30.0,
                 denied_reason: Callable[[BaseException], str | None] = lambda exc: None,
                 clock: Callable[[], float] = time.time, read_timeout_ms: int = 500,
                 idle_read_timeout_ms: int | None = None,
                 commit_every_s: float = COMMIT_EVERY_S, commit_busy_s: float = COMMIT_BUSY_S,
                 commit_max_records: int = COMMIT_MAX_RECORDS, commit_busy_records: int = COMMIT_BUSY_RECORDS,
                 health: StoreHealth | None = None, keeps: Callable[[str], bool] | None = None,
                 gc_window: PollWindow = PROCESS) -> None:
        """``idle_read_timeout_ms``: a read's wait while nothing is applied or in flight (``IDLE_READ_FACTOR`` ×
        ``read_timeout_ms`` unless given).  ``gc_window``: pauses CPython's cyclic GC during each step (core/pollwindow.py).
        ``health``: the store's health, where objects the database refuses are counted.  ``keeps``: the
        cluster's transactional_id_pattern (tenancy); other ids' records advance the positions and are checked
        for gaps, but are neither applied nor stored (undecodable records, which name no id, are kept)."""
        self.name = name
        self._rejections = Rejections(health or StoreHealth())
        self._keeps = keeps
        self._gc_window = gc_window
        self._bootstrap = bootstrap_servers
        self._open_tail = open_tail
        self._sessions = sessions
        self._state = state
        self._leading = leading
        self._fence = fence
        self._term: object = None
        self._detection = detection
        self._retry_s = retry_s
        self._denied_reason = denied_reason
        self._clock = clock
        self._read_timeout_ms = read_timeout_ms
        self._idle_read_timeout_ms = (read_timeout_ms * IDLE_READ_FACTOR if idle_read_timeout_ms is None
                                      else idle_read_timeout_ms)
        self._commit_every_s = commit_every_s
        self._commit_busy_s = commit_busy_s
        self._commit_max_records = commit_max_records
        self._commit_busy_records = commit_busy_records
        # Applied but not yet committed: the state after them, their findings, the positions they reach.
        self._applied: detect_txnlog.TxnLogState | None = None
        self._pending: list[detect_txnlog.TxnLogFindings] = []
        self._pending_positions: dict[int, int] = {}
        # The positions the database holds (loaded at open, updated by each commit): a commit writes only the
        # partitions that moved since, not all 50 of the log's every second (issue 25); empty when unknown.
        self._stored_positions: dict[int, int] = {}
        self._pending_records = 0
        self._pending_problems = 0
        self._pending_last_ms = 0
        self._pending_since = 0.0
        self._pending_gaps: list[HistoryGap] = []
        # Offsets compaction removed before they were read (detect/txnlog_gaps.py): found while reading,
        # counted once committed (a reopen after a failed write finds them again).
        self._gap_watch = txnlog_gaps.GapWatch({}, {})
        self._watching_all = False
        self._gaps: tuple[HistoryGap, ...] = ()
        self._gap_count = 0
        self._gap_records = 0
        self._tail: Tail | None = None
        self._cluster_id: int | None = None
        self._log_state = detect_txnlog.TxnLogState()
        self._counters: dict[str, int] = {}
        self._retry_at = 0.0
        self._checked_at = 0.0
        self._lag: int | None = None
        self._last_record_ms: int | None = None
        self._caught_up_ms: int | None = None
        self._decode_errors = 0
        self._reason = "starting"
        self._wrote = False  # rows committed since the last publication (see _publish)
        self._writer = CommitWriter(f"txnlog-w:{name}")
        self._inflight: _InFlight | None = None  # handed to the writer, outcome not collected yet

    # -- one step ------------------------------------------------------------------------------

    def step(self) -> int:
        """Read and apply one batch (or open the tail); returns how many records were applied."""
        with self._gc_window.batch():  # the fetch's records, states and transitions, without the GC's scans
            return self._step()

    def _step(self) -> int:
        term = self._leading()
        if self._tail is not None and term != self._term:
            # A new term (or none): another replica may have advanced the stored positions meanwhile.
            self._close()
        if not term:
            if self._tail is not None or self._reason != "follower":
                self._close()
                self._reason = "follower"
                self._publish(POLLING, "this replica is a follower; the leader tails the transaction log")
            return 0
        now = self._clock()
        if self._tail is None and not self._open(now):
            return 0
        self._term = term
        assert self._tail is not None
        try:
            records, problems = self._tail.read(self._read_wait_ms())
            positions = self._tail.positions()
        except Exception as exc:
            self._lost(exc, now)
            return 0
        for problem in problems:
            log.warning("cluster %s: %s %s: %s", self.name, problem.api, problem.target, problem.message)
        self._gap_watch, gaps = txnlog_gaps.find_gaps(self._gap_watch, records)
        self._pending_gaps.extend(gaps)
        keeps = self._keeps
        kept = records if keeps is None else [r for r in records if not r.transactional_id or keeps(r.transactional_id)]
        if records:
            if not self._pending:
                self._pending_since = now
            self._applied, findings = detect_txnlog.apply(self._applied or self._log_state, kept)
            self._pending.append(findings)
            self._pending_positions = dict(positions)
            self._pending_records += len(records)
            self._pending_problems += len(problems)
            self._pending_last_ms = max(self._pending_last_ms, newest_ms(records))
        periodic = now - self._checked_at >= CHECK_EVERY_S
        if self._due(now, idle=not records) and not self._flush(now):
            return 0
        # A drained log, and the open-transaction check, want the commit in flight done (committed state only).
        if (periodic or not records) and not self._settle(now):
            return 0
        if periodic or not records:
            if periodic:
                self._periodic(now)
            self._publish(EXACT, "reading the transaction log")
        return len(records)

    def _read_wait_ms(self) -> int:
        """The short wait while applied records await their commit or a commit awaits collection (the empty read
        that ends the wait commits or publishes them), the long one when there is nothing to hand on."""
        busy = self._pending or self._inflight is not None
        return self._read_timeout_ms if busy else self._idle_read_timeout_ms

    def _due(self, now: float, *, idle: bool) -> bool:
        """Commit when the log is drained, a second has passed, the size bound is reached, or before the periodic
        open-transaction check (which must see committed state only); or, while records keep coming (at least
        ``commit_busy_records`` of them), after ``commit_busy_s`` if the writer is free (never waiting for it then:
        the reader reads on meanwhile)."""
        if not self._pending:
            return False
        waited = now - self._pending_since
        return (idle or self._pending_records >= self._commit_max_records or waited >= self._commit_every_s
                or now - self._checked_at >= CHECK_EVERY_S
                or (waited >= self._commit_busy_s and self._pending_records >= self._commit_busy_records
                    and self._writer.free))

    def _flush(self, now: float) -> bool:
        """Hand everything applied since the last hand-off, with the positions it reached, to the writer as ONE
        transaction; first collect the commit in flight (back-pressure: one at most).  False: a write failed."""
        if not self._settle(now):
            return False
        assert self._applied is not None
        findings = detect_txnlog.merge(self._pending)
        moved = {p: o for p, o in self._pending_positions.items() if self._stored_positions.get(p) != o}
        try:
            cluster_id = self._require_id()
        except Exception as exc:
            self._db_failed(exc, now)
            return False
        self._inflight = _InFlight(self._applied, dict(findings.counts), moved, self._pending_last_ms,
                                   self._pending_problems, self._pending_gaps)
        # The next fetches apply on top of self._applied (kept); only the pending bookkeeping starts again.
        self._pending = []
        self._pending_positions = {}
        self._pending_records = self._pending_problems = self._pending_last_ms = 0
        self._pending_gaps = []
        self._writer.submit(lambda: self._write(cluster_id, moved, findings))
        return True

    def _write(self, cluster_id: int, moved: dict[int, int], findings: detect_txnlog.TxnLogFindings) -> None:
        """On the writer thread: the positions and everything derived up to them, in one transaction.

        Through a Core connection, not a Session: nothing here uses the ORM's unit of work, and a Session's begin,
        connection bookkeeping and close were ~0.1-0.2 ms of a trickle's ~1 ms commit (issue 25).  The fence and
        the statements run in the connection's one transaction, as they did in the Session's."""
        try:
            with self._begin() as connection:
                self._fence(connection)  # refused unless this replica still holds the cluster's lease
                store_txnlog.write_batch(connection, cluster_id, moved, findings)
        except DBAPIError as exc:
            if not refused_data(exc):
                raise
            # A tenant's id the database cannot hold costs that id's rows, not the tail (issue 23).
            with self._sessions.begin() as session:
                self._fence(session)
                store_txnlog.write_batch_isolating(session, cluster_id, moved, findings, self._rejections)

    def wait_committed(self) -> bool:
        """Block until the commit in flight (if any) is done and collected; False if it failed.  The tail's own
        thread only (tests and benchmarks: the daemon collects it at the next commit or the next empty read)."""
        return self._settle(self._clock())

    def _settle(self, now: float) -> bool:
        """Collect the commit in flight: committed, it becomes the tail's truth; failed, everything uncommitted
        is dropped and the tail resumes from the database (as a failed write always did).  True unless failed."""
        inflight, self._inflight = self._inflight, None
        if inflight is None:
            return True
        error = self._writer.wait()
        if error is not None:
            if not isinstance(error, Exception):
                raise error
            self._db_failed(error, now)
            return False
        self._stored_positions.update(inflight.moved)
        self._log_state = inflight.state
        if not self._pending:
            self._applied = None  # nothing applied since: the committed state is the state
        self._wrote = True
        for key, value in inflight.counts.items():
            self._counters[key] = self._counters.get(key, 0) + value
        self._last_record_ms = max(self._last_record_ms or 0, inflight.last_ms)
        self._decode_errors += inflight.problems
        self._count_gaps(inflight.gaps)
        return True

    def _count_gaps(self, gaps: list[HistoryGap]) -> None:
        for gap in gaps:
            log.warning("cluster %s: history gap on %s-%d: offsets %d..%d (%d records) were compacted away before "
                        "they were read; transitions between %s and %s are lost and counters for that span are "
                        "lower bounds", self.name, "__transaction_state", gap.log_partition, gap.first_offset,
                        gap.last_offset, gap.records, _when(gap.after_ms), _when(gap.before_ms))
        self._gaps = (*self._gaps, *gaps)[-KEPT_GAPS:]
        self._gap_count += len(gaps)
        self._gap_records += sum(g.records for g in gaps)

    def _drop_pending(self) -> None:
        self._applied = None
        self._pending = []
        self._pending_positions = {}
        self._pending_records = self._pending_problems = self._pending_last_ms = 0
        self._pending_gaps = []

    def _periodic(self, now: float) -> None:
        self._checked_at = now
        assert self._tail is not None
        try:
            ends = self._tail.end_offsets()
            positions = self._tail.positions()
            self._lag = sum(max(0, end - positions.get(p, end)) for p, end in ends.items())
            if self._lag == 0:
                self._caught_up_ms = int(now * 1000)
                if not self._watching_all:  # from here on a hole anywhere is a gap, not history before us
                    self._gap_watch = txnlog_gaps.watch_everything(self._gap_watch, positions)
                    self._watching_all = True
        except Exception as exc:
            log.debug("cluster %s: log end offsets unavailable (%s)", self.name, exc)
        checked, found = detect_txnlog.check_open(self._log_state, int(now * 1000), self._detection)
        if found:
            try:
                with self._sessions.begin() as session:
                    self._fence(session)
                    store_txnlog.write_anomalies(session, self._require_id(), found)
                self._wrote = True
            except Exception as exc:
                log.warning("cluster %s: could not store %d open-transaction anomalies (%s); will report them "
                            "again", self.name, len(found), exc)
                return
        self._log_state = checked

    # -- opening, losing, publishing -------------------------------------------------------------

    def _begin(self) -> AbstractContextManager[Connection | Session]:
        """A transaction on the sessions' engine (a Core connection); a Session where they are bound otherwise."""
        bind = self._sessions.kw.get("bind")
        return bind.begin() if isinstance(bind, Engine) else self._sessions.begin()

    def _require_id(self) -> int:
        if self._cluster_id is None:
            self._cluster_id = cluster_id_for(self._sessions, self.name)
        return self._cluster_id

    def _open(self, now: float) -> bool:
        if now < self._retry_at:
            return False
        try:
            with self._sessions() as session:
                resumed = store_txnlog.load(session, self._require_id())
        except Exception as exc:
            self._cluster_id = None
            self._retry_at = now + DB_RETRY_S
            self._publish(POLLING, f"cannot read the stored log positions ({_short(exc)}); retrying")
            return False
        try:
            tail = self._open_tail(resumed.positions)
        except Exception as exc:
            self._unavailable(exc, now, "cannot open")
            return False
        self._tail = tail
        self._stored_positions = dict(resumed.positions)
        self._log_state, self._counters = resumed.state, dict(resumed.counters)
        self._gap_watch = txnlog_gaps.start_watch(resumed.positions, resumed.state.ids.values())
        self._watching_all = False
        self._checked_at = 0.0
        if self._reason != EXACT:
            log.info("cluster %s: exact history from %s (%d stored positions, %d known ids)", self.name,
                     "__transaction_state", len(resumed.positions), len(resumed.state.ids))
        self._reason = EXACT
        return True

    def _unavailable(self, exc: BaseException, now: float, doing: str) -> None:
        reason = self._denied_reason(exc) or f"{doing} the transaction log: {_short(exc)}"
        if reason != self._reason:
            log.warning("cluster %s: history falls back to polling: %s (trying the log again every %.0fs)",
                        self.name, reason, self._retry_s)
        self._reason = reason
        self._retry_at = now + self._retry_s
        self._publish(POLLING, reason)

    def _lost(self, exc: BaseException, now: float) -> None:
        self._close()
        self._unavailable(exc, now, "lost")

    def _db_failed(self, exc: BaseException, now: float) -> None:
        """Nothing of this batch committed: forget it, and start again from what the database holds."""
        log.warning("cluster %s: storing transaction log records failed (%s); resuming from the last committed "
                    "position", self.name, _short(exc))
        self._close()
        self._cluster_id = None
        self._retry_at = now + DB_RETRY_S
        self._reason = "database write failed"
        self._publish(POLLING, f"database write failed ({_short(exc)}); will resume from the last committed "
                               "position")

    def _publish(self, mode: str, reason: str) -> None:
        """Publish the history view, unless it equals the published one and nothing was written since.

        An idle tail comes here after every empty read (twice a second): publishing moves the state's generation,
        and the API's answer cache (serve/answer_cache.py) drops every answer on each move, so an idle cluster
        sent a burst of recomputed list answers every 0.5 s (issue 25).  Skipping an equal view changes nothing
        a reader sees; a write (a batch, anomalies) always publishes, since cached answers read those rows."""
        s = self._log_state
        opened = detect_txnlog.open_transactions(s) if mode == EXACT else {}
        stuck = {k for k in s.reported if k[3] == STUCK_PREPARE}
        history = HistoryView(
            mode=mode, reason=reason, counters=dict(self._counters), lag_records=self._lag if mode == EXACT else None,
            last_record_at_ms=self._last_record_ms, caught_up_at_ms=self._caught_up_ms, ids=len(s.ids),
            open_transactions=len(opened), stuck_prepare=len(stuck), long_transactions=len(s.reported) - len(stuck),
            decode_errors=self._decode_errors, states=s.ids if mode == EXACT else {}, gaps=self._gaps,
            gap_count=self._gap_count, gap_records=self._gap_records)
        published = self._state.get(self.name)
        if not self._wrote and published is not None and published.history == history:
            return
        self._wrote = False
        self._state.update(self.name, history=history)

    def _close(self) -> None:
        """Uncommitted batches are dropped with the tail: reopening reloads positions and state together.

        A commit in flight is waited for first, so none lands after the reload that follows."""
        if self._inflight is not None:
            self._inflight = None
            error = self._writer.wait()
            if error is not None:
                log.warning("cluster %s: storing transaction log records failed (%s); resuming from the last "
                            "committed position", self.name, _short(error))
        self._drop_pending()
        self._stored_positions = {}
        tail, self._tail = self._tail, None
        self._lag = None
        if tail is not None:
            try:
                tail.close()
            except Exception:
                log.debug("closing the transaction log tail of %s failed", self.name, exc_info=True)

    def close(self) -> None:
        """On a clean stop, commit what was applied (best effort: whatever fails is re-read at the next start)."""
        if (self._pending or self._inflight) and self._tail is not None and self._term \
                and self._leading() == self._term:
            now = self._clock()
            if not self._pending or self._flush(now):
                self._settle(now)
        self._close()
        self._writer.close()


class TxnLogService:
    """Starts a thread per cluster tail; stop() waits for them to finish their current batch."""

    def __init__(self, tails: list[ClusterTail]) -> None:
        self._tails = tails
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        for tail in self._tails:
            thread = threadnames.thread(self._run, f"txnlog:{tail.name}", args=(tail,))
            thread.start()
            self._threads.append(thread)

    def _run(self, tail: ClusterTail) -> None:
        while not self._stop.is_set():
            try:
                if tail.step() == 0:
                    self._stop.wait(0.2)
            except Exception:
                log.exception("cluster %s: transaction log tail step failed; retrying", tail.name)
                tail.close()
                self._stop.wait(DB_RETRY_S)
        tail.close()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)


_KIND, _LAST_UPDATE_MS = attrgetter("kind"), attrgetter("last_update_ms")
_ONLY_VALUES = {TxnLogKind.VALUE}


def newest_ms(records: list[TxnLogRecord]) -> int:
    """``max(r.at_ms for r in records)`` (non-empty): read in C when every record is a value with its coordinator's
    time, as everything Kafka writes but a tombstone is, since the property's Python call per record was 2-3 % of
    the tail's CPU (py-spy, issue 25); else record by record."""
    updates = list(map(_LAST_UPDATE_MS, records))
    if min(updates) > 0 and set(map(_KIND, records)) == _ONLY_VALUES:
        return max(updates)
    return max(r.at_ms for r in records)


def _when(at_ms: int | None) -> str:
    if at_ms is None:
        return "an unknown time"
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at_ms / 1000))


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
