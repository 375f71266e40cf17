"""Exact coordinator history: the transaction log's records, applied in order.

``apply(state, records, settings) -> (state, findings)`` is pure: the same records
from the same state always give the same events, so a restart that resumes from the
stored state and log positions derives exactly what an uninterrupted run would.

What each record means (Kafka's TransactionCoordinator / TransactionMetadata; KIP-890,
KIP-360, KIP-588):

* **commit / abort**: the id reaches CompleteCommit / CompleteAbort.  Counted at
  Complete*, once per transaction (a repeated Complete* of the same producer id and
  epoch is not a second outcome); its duration is last update minus start.
* **epoch_bump**: the epoch rose within one producer id.  Counted by how much it rose,
  so a transaction-version-2 producer that committed 420 times counts 420.
* **producer_id_change**: the id moved to another producer id (KIP-360: epoch
  exhaustion, InitProducerId with a new id; TV2 overflow at Complete*).
* **timeout_abort**: the coordinator aborted an Ongoing transaction that had run past
  its ``transaction.timeout.ms`` (PrepareAbort with an epoch bump the client's own
  EndTxn would not make, KIP-588).
* **fenced**: a new producer instance's InitProducerId ended an open transaction
  before its timeout.  On the wire: the coordinator fences the epoch (the in-memory
  PrepareEpochFence, written as PrepareAbort with a bumped epoch), completes the
  abort, then the retried InitProducerId writes Empty with another bump.  A
  transaction-version-1 client never bumps on its own abort, so the bump proves the
  fence at PrepareAbort.  A TV2 client bumps on every EndTxn (KIP-890 part 2), so
  its PrepareAbort alone is ambiguous; it is a fence when the next record of the id
  is that InitProducerId (Empty with a bump right after the CompleteAbort).
* **init_producer_id**: Empty with a bump or new producer id after a finished
  transaction: a producer (re)started with the id.
* **expired**: a tombstone (``transactional.id.expiration.ms``).
* **illegal_transition**: a move Kafka's ``TransactionState.validPreviousStates``
  (``vocabulary.VALID_PREVIOUS``) does not allow (e.g. PrepareCommit -> PrepareAbort, the article's "COMMITTING -> ABORTING").
* **unknown_record / unknown_state / unknown_fields**: records, status bytes or tagged
  fields this code does not know.  Reported with their raw values; they never stop
  the tail.  An undecodable value leaves the id's state as it was.

Stuck Prepare* and transactions running past their timeout are durations, not
records: :func:`check_open` reports them against a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from txnwatch.core.model import TxnLogKind, TxnLogRecord
from txnwatch.core.vocabulary import OPEN_STATES, PREPARE_STATES, VALID_PREVIOUS, TxnEvent, TxnState
from txnwatch.detect.settings import DetectionSettings

EMPTY, ONGOING = TxnState.EMPTY, TxnState.ONGOING
PREPARE_COMMIT, PREPARE_ABORT = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
FENCE, DEAD, UNKNOWN = TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD, TxnState.UNKNOWN

_OPEN, _PREPARE = frozenset(OPEN_STATES), frozenset(PREPARE_STATES)

# How the current abort came about (IdState.abort).
ABORT_CLIENT, ABORT_SERVER, ABORT_AMBIGUOUS, ABORT_TIMEOUT = "client", "server", "ambiguous", "timeout"

#: Event names (txnwatch.core.vocabulary.TxnEvent) as the plain strings counter keys and transition rows hold;
#: bound once here because the hot path names one per record.
COMMIT, ABORT, EPOCH_BUMP = TxnEvent.COMMIT.value, TxnEvent.ABORT.value, TxnEvent.EPOCH_BUMP.value
PRODUCER_ID_CHANGE, TIMEOUT_ABORT = TxnEvent.PRODUCER_ID_CHANGE.value, TxnEvent.TIMEOUT_ABORT.value
FENCED, INIT_PRODUCER_ID, EXPIRED = TxnEvent.FENCED.value, TxnEvent.INIT_PRODUCER_ID.value, TxnEvent.EXPIRED.value
ILLEGAL, NEW = TxnEvent.ILLEGAL_TRANSITION.value, TxnEvent.NEW.value
UNKNOWN_RECORD, UNKNOWN_STATE = TxnEvent.UNKNOWN_RECORD.value, TxnEvent.UNKNOWN_STATE.value
UNKNOWN_FIELDS = TxnEvent.UNKNOWN_FIELDS.value
STUCK_PREPARE, LONG_TRANSACTION = TxnEvent.STUCK_PREPARE.value, TxnEvent.LONG_TRANSACTION.value
#: Events worth a row in the hot database (the rest of the stream goes to the archive only).
ANOMALIES = frozenset({TIMEOUT_ABORT, FENCED, PRODUCER_ID_CHANGE, EXPIRED, ILLEGAL, UNKNOWN_RECORD, UNKNOWN_STATE,
                       UNKNOWN_FIELDS, STUCK_PREPARE, LONG_TRANSACTION})
#: Cumulative counters the tail keeps per cluster (plus "records" and "transition:<from>:<to>").
COUNTED = (COMMIT, ABORT, EPOCH_BUMP, PRODUCER_ID_CHANGE, TIMEOUT_ABORT, FENCED, INIT_PRODUCER_ID, EXPIRED, ILLEGAL,
           UNKNOWN_RECORD, UNKNOWN_STATE, UNKNOWN_FIELDS)
BUCKET_MS = 60_000
_NAME = {state: state.value for state in TxnState}
#: "transition:<from>:<to>" counter keys, built once (the hot path names one per record).
_TRANSITION_KEY = {(a, b): f"transition:{_NAME[a] if a is not None else 'None'}:{_NAME[b]}"
                   for a in (None, *TxnState) for b in TxnState}


class IdState(NamedTuple):
    """What the log last said about one transactional id, plus what classifying the next record needs."""

    state: TxnState
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int | None
    last_update_ms: int
    partitions: tuple[tuple[str, int], ...]
    client_transaction_version: int
    #: The client's own transaction version, learnt from its PrepareCommit (only a client commits).
    client_tv: int | None
    #: How the current/last abort came about (ABORT_*), None outside aborts.
    abort: str | None
    log_partition: int
    offset: int
    commits: int = 0
    aborts: int = 0
    epoch_bumps: int = 0
    fences: int = 0
    timeout_aborts: int = 0


class LogTransition(NamedTuple):
    """One applied record: the full stream, archived to Parquet; anomalies also stay in the hot database."""

    transactional_id: str
    at_ms: int
    log_partition: int
    offset: int
    from_state: str | None
    to_state: str
    producer_id: int
    producer_epoch: int
    prev_producer_id: int | None
    prev_producer_epoch: int | None
    timeout_ms: int
    start_ms: int | None
    partitions: tuple[tuple[str, int], ...]
    events: tuple[str, ...]
    duration_ms: int | None
    client_transaction_version: int
    detail: str | None = None


@dataclass(frozen=True, slots=True)
class TxnLogState:
    """Every id's latest state, and which open transactions were already reported as stuck/long."""

    ids: Mapping[str, IdState] = field(default_factory=dict)
    reported: frozenset[tuple[str, int, int, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class TxnLogFindings:
    transitions: tuple[LogTransition, ...] = ()
    #: Increments of the cumulative counters (COUNTED keys, "records", "transition:<from>:<to>").
    counts: Mapping[str, int] = field(default_factory=dict)
    #: Ids whose state changed, with their new state (None: expired and removed).
    changed: Mapping[str, IdState | None] = field(default_factory=dict)
    #: Per-minute aggregates: bucket start ms -> counter increments ("duration_ms_sum"/"_count"/"_max" too).
    buckets: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    @property
    def anomalies(self) -> tuple[LogTransition, ...]:
        return tuple(t for t in self.transitions if not ANOMALIES.isdisjoint(t.events))


def _abort_origin(prev: IdState, epoch: int, record_tv: int) -> str:
    """Who wrote this PrepareAbort over an Ongoing transaction: the client's EndTxn or the coordinator."""
    bump = epoch - prev.producer_epoch
    if bump <= 0:
        return ABORT_CLIENT  # nobody but a TV1 client aborts without a bump
    if prev.client_tv is not None and prev.client_tv < 2:
        return ABORT_SERVER  # a TV1 client's EndTxn never bumps
    if record_tv < 2 or bump >= 2:
        return ABORT_SERVER  # a bump no TV2 EndTxn makes (one bump per EndTxn)
    return ABORT_AMBIGUOUS


def apply(state: TxnLogState, records: Iterable[TxnLogRecord]) -> tuple[TxnLogState, TxnLogFindings]:
    """Apply records in log order (per coordinator partition); ``state`` is not modified."""
    ids = dict(state.ids)
    changed: dict[str, IdState | None] = {}
    counts: dict[str, int] = {}
    buckets: dict[int, dict[str, int]] = {}
    transitions: list[LogTransition] = []
    n = 0
    for rec in records:
        n += 1
        tid = rec.transactional_id
        prev = ids.get(tid)
        kind = rec.kind
        if kind is not TxnLogKind.VALUE:
            at = rec.timestamp_ms or 0
            if kind is TxnLogKind.TOMBSTONE:
                events: tuple[str, ...] = (EXPIRED,)
                ids.pop(tid, None)
                changed[tid] = None
                to_state, detail = DEAD.value, None
            else:
                events = (UNKNOWN_RECORD,)
                to_state = UNKNOWN.value
                detail = f"{rec.problem}; raw value {(rec.raw_value or b'').hex()[:512]}"
            transitions.append(LogTransition(
                tid, at, rec.log_partition, rec.offset, _NAME[prev.state] if prev else None, to_state,
                prev.producer_id if prev else -1, prev.producer_epoch if prev else -1,
                prev.producer_id if prev else None, prev.producer_epoch if prev else None,
                prev.timeout_ms if prev else 0, prev.start_ms if prev else None, (), events, None,
                prev.client_transaction_version if prev else 0, detail))
            _count(counts, buckets, at, events, None, 0)
            continue

        cur = rec.state
        assert cur is not None
        pid, epoch, tv, at = rec.producer_id, rec.producer_epoch, rec.client_transaction_version, rec.last_update_ms
        ev: list[str] = []
        bump = 0
        duration = None
        abort = None
        client_tv = None
        commits = aborts = bumps = fences = timeouts = 0
        if prev is None:
            ev.append(NEW)
        else:
            client_tv = prev.client_tv
            commits, aborts, bumps, fences, timeouts = (prev.commits, prev.aborts, prev.epoch_bumps, prev.fences,
                                                        prev.timeout_aborts)
            pstate = prev.state
            if pid != prev.producer_id:
                ev.append(PRODUCER_ID_CHANGE)
                client_tv = None
            elif epoch > prev.producer_epoch:
                bump = epoch - prev.producer_epoch
                ev.append(EPOCH_BUMP)
                bumps += bump
            valid = VALID_PREVIOUS.get(cur)
            if valid is not None and pstate is not UNKNOWN and pstate not in valid:
                ev.append(ILLEGAL)
            if cur is PREPARE_ABORT:
                if pstate is ONGOING and pid == prev.producer_id:
                    abort = _abort_origin(prev, epoch, tv)
                elif pstate is FENCE:
                    abort = ABORT_SERVER if prev.abort is None else prev.abort
                else:
                    abort = ABORT_CLIENT
                if abort != ABORT_CLIENT and abort != ABORT_TIMEOUT and pstate is ONGOING:
                    start = rec.start_ms if rec.start_ms is not None else prev.start_ms
                    if start is not None and at - start >= prev.timeout_ms:
                        abort = ABORT_TIMEOUT
                        ev.append(TIMEOUT_ABORT)
                        timeouts += 1
                    elif abort == ABORT_SERVER and prev.abort != ABORT_SERVER:
                        ev.append(FENCED)
                        fences += 1
            elif cur is FENCE:
                abort = ABORT_SERVER
                if prev.abort != ABORT_SERVER:
                    ev.append(FENCED)
                    fences += 1
            elif cur is COMPLETE_ABORT:
                abort = prev.abort
            elif cur is EMPTY and (bump or PRODUCER_ID_CHANGE in ev):
                if pstate is COMPLETE_ABORT and prev.abort == ABORT_AMBIGUOUS:
                    ev.append(FENCED)
                    fences += 1
                elif pstate not in _OPEN:
                    ev.append(INIT_PRODUCER_ID)
        if cur is COMPLETE_COMMIT or cur is COMPLETE_ABORT:
            if prev is None or prev.state is not cur or prev.producer_epoch != epoch or prev.producer_id != pid:
                if cur is COMPLETE_COMMIT:
                    ev.append(COMMIT)
                    commits += 1
                else:
                    ev.append(ABORT)
                    aborts += 1
                if rec.start_ms is not None:
                    duration = max(0, at - rec.start_ms)
        elif cur is PREPARE_COMMIT:
            client_tv = tv
        elif cur is UNKNOWN:
            ev.append(UNKNOWN_STATE)
        if rec.unknown_tags or rec.problem:
            ev.append(UNKNOWN_FIELDS)
        events = tuple(ev)
        new = IdState(cur, pid, epoch, rec.timeout_ms, rec.start_ms, at, rec.partitions, tv, client_tv, abort,
                      rec.log_partition, rec.offset, commits, aborts, bumps, fences, timeouts)
        ids[tid] = new
        changed[tid] = new
        detail = None
        if rec.raw_status is not None or rec.unknown_tags or rec.problem:
            detail = "; ".join(filter(None, (
                rec.problem, f"transaction status {rec.raw_status}" if rec.raw_status is not None else None,
                ", ".join(f"tagged field {tag} = {raw.hex()[:256]}" for tag, raw in rec.unknown_tags) or None)))
        transitions.append(LogTransition(
            tid, at, rec.log_partition, rec.offset, _NAME[prev.state] if prev else None,
            _NAME[cur] if cur is not UNKNOWN else f"Unknown({rec.raw_status})",
            pid, epoch, prev.producer_id if prev else None, prev.producer_epoch if prev else None,
            rec.timeout_ms, rec.start_ms, rec.partitions, events, duration, tv, detail))
        if events:
            _count(counts, buckets, at, events, duration, bump)
        key = _TRANSITION_KEY[(prev.state if prev else None, cur)]
        counts[key] = counts.get(key, 0) + 1
    counts["records"] = counts.get("records", 0) + n
    return (TxnLogState(ids, state.reported),
            TxnLogFindings(tuple(transitions), counts, changed, buckets))


def merge(batches: Sequence[TxnLogFindings]) -> TxnLogFindings:
    """What applying the batches' records one after another found, as if applied in one batch.

    The tail applies every fetch at once but stores at most about once a second: counts and
    per-minute aggregates add up (the maximum duration takes the larger), transitions keep log
    order, and an id changed in several keeps only its latest state, so one id touched a
    thousand times between two commits costs one row write.
    """
    if len(batches) == 1:
        return batches[0]
    counts: dict[str, int] = {}
    changed: dict[str, IdState | None] = {}
    buckets: dict[int, dict[str, int]] = {}
    transitions: list[LogTransition] = []
    for found in batches:
        transitions.extend(found.transitions)
        changed.update(found.changed)
        for key, value in found.counts.items():
            counts[key] = counts.get(key, 0) + value
        for start, values in found.buckets.items():
            bucket = buckets.setdefault(start, {})
            for key, value in values.items():
                if key == "duration_ms_max":
                    bucket[key] = max(bucket.get(key, 0), value)
                else:
                    bucket[key] = bucket.get(key, 0) + value
    return TxnLogFindings(tuple(transitions), counts, changed, buckets)


def _count(counts: dict[str, int], buckets: dict[int, dict[str, int]], at_ms: int, events: tuple[str, ...],
           duration_ms: int | None, bump: int) -> None:
    if not events:
        return
    bucket = buckets.get(at_ms - at_ms % BUCKET_MS)
    if bucket is None:
        bucket = buckets[at_ms - at_ms % BUCKET_MS] = {}
    for event in events:
        step = bump if event == EPOCH_BUMP else 1
        counts[event] = counts.get(event, 0) + step
        bucket[event] = bucket.get(event, 0) + step
    if duration_ms is not None:
        bucket["duration_ms_sum"] = bucket.get("duration_ms_sum", 0) + duration_ms
        bucket["duration_count"] = bucket.get("duration_count", 0) + 1
        bucket["duration_ms_max"] = max(bucket.get("duration_ms_max", 0), duration_ms)


def check_open(state: TxnLogState, now_ms: int,
               settings: DetectionSettings = DetectionSettings()) -> tuple[TxnLogState, tuple[LogTransition, ...]]:
    """Open transactions the log says are stuck in Prepare* or running past their timeout.

    Each is reported once per transaction (id, producer id, epoch, kind); ``reported`` forgets
    transactions that have moved on, so the state stays as small as the set of open ones.
    """
    found: list[LogTransition] = []
    still: set[tuple[str, int, int, str]] = set()
    for tid, s in state.ids.items():
        if s.state not in _OPEN:
            continue
        if s.state in _PREPARE:
            kind, since, limit = STUCK_PREPARE, s.last_update_ms, settings.prepare_stuck_ms
        elif s.start_ms is not None:
            kind, since, limit = LONG_TRANSACTION, s.start_ms, s.timeout_ms + settings.timeout_grace_ms
        else:
            continue
        if now_ms - since <= limit:
            continue
        key = (tid, s.producer_id, s.producer_epoch, kind)
        still.add(key)
        if key in state.reported:
            continue
        found.append(LogTransition(
            tid, now_ms, s.log_partition, s.offset, s.state.value, s.state.value, s.producer_id, s.producer_epoch,
            s.producer_id, s.producer_epoch, s.timeout_ms, s.start_ms, s.partitions, (kind,), now_ms - since,
            s.client_transaction_version, f"{s.state.value} for {(now_ms - since) // 1000}s"))
    if not found and still == state.reported:
        return state, ()
    return TxnLogState(state.ids, frozenset(still)), tuple(found)


def open_transactions(state: TxnLogState) -> dict[str, IdState]:
    """Ids with an open transaction right now, per the log."""
    return {tid: s for tid, s in state.ids.items() if s.state in _OPEN}
