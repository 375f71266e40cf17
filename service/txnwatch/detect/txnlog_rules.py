"""What one transaction log record means: one small rule per record kind and per state reached.

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
  (``vocabulary.VALID_PREVIOUS``) does not allow (e.g. PrepareCommit -> PrepareAbort,
  the article's "COMMITTING -> ABORTING").
* **unknown_record / unknown_state / unknown_fields**: records, status bytes or tagged
  fields this code does not know.  Reported with their raw values; they never stop
  the tail.  An undecodable value leaves the id's state as it was.

**The known tags, used when a record carries them.**  Kafka 4.3+ writes PreviousProducerId (tag 0) on
every flexible value: the producer id the id had *before* this transition (``TransactionMetadata``'s
``prepareTransitionTo`` takes the current id).  It is authoritative where the sequence can only infer:

* a producer id change is ``producer_id != previous_producer_id``, and the transition links the two even
  when txnwatch never saw the record before (the first record of an id read after a gap, or from a
  compacted log: ``new`` *and* ``producer_id_change``), or saw a different one (records missed between:
  the link is the tag's, and no epoch bump is guessed across it);
* NextProducerId (tag 1) on a PrepareCommit/PrepareAbort says the coordinator has already picked the
  producer id this transaction completes under (transaction version 2, the epoch exhausted at 32,767:
  ``prepareAbortOrCommit``); the Prepare* transition names it in its detail, before the Complete* record
  that moves the id arrives.

Kafka <= 4.2 never writes tags 0 and 1 (KAFKA-20310): then the sequence decides, as before.  Where both
are knowable (the previous record of the id was seen) they give the same history, which
tests/unit/detect/test_txnlog_tags.py checks record by record.  No tag tells a fence from a transaction
version 2 client's own abort (that needs a lastProducerEpoch, apache/kafka#22096, not written by any
release yet), so that still waits for the next record.

A value record is read in steps, each its own function: the id's identity move (new, new
producer id, epoch bump), the move's legality, the rule of the state it reaches
(:data:`_REACHING`), the outcome a Complete* state settles, unknown fields; the id's
running counts follow from the events.  This runs for every record of every coordinator
(tens of thousands a second), so the per-record path builds its two tuples in one place
each rather than by keyword: benchmarks/txnlog.py measures it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from txnwatch.core.findings import Transition
from txnwatch.core.model import TxnLogKind, TxnLogRecord
from txnwatch.core.vocabulary import (
    ABORT,
    COMMIT,
    EPOCH_BUMP,
    EXPIRED,
    FENCED,
    ILLEGAL_TRANSITION,
    INIT_PRODUCER_ID,
    NEW,
    OPEN_STATES,
    PRODUCER_ID_CHANGE,
    TIMEOUT_ABORT,
    UNKNOWN_FIELDS,
    UNKNOWN_RECORD,
    UNKNOWN_STATE,
    VALID_PREVIOUS,
    TransitionSource,
    TxnState,
)

EMPTY, ONGOING = TxnState.EMPTY, TxnState.ONGOING
PREPARE_COMMIT, PREPARE_ABORT = TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
COMPLETE_COMMIT, COMPLETE_ABORT = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
FENCE, DEAD, UNKNOWN = TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD, TxnState.UNKNOWN
_OPEN = frozenset(OPEN_STATES)

# How the current abort came about (IdState.abort).
ABORT_CLIENT, ABORT_SERVER, ABORT_AMBIGUOUS, ABORT_TIMEOUT = "client", "server", "ambiguous", "timeout"

#: Every transition built here is the log's (read once per record: a module global, not an enum lookup).
_LOG = TransitionSource.TRANSACTION_LOG
_NAME = {state: state.value for state in TxnState}
_new_tuple = tuple.__new__


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


#: The id's running counts, in IdState's order: commits, aborts, epoch bumps, fences, timeout aborts.
Tally = tuple[int, int, int, int, int]
_NO_TALLY: Tally = (0, 0, 0, 0, 0)


# --- a value record, step by step ---------------------------------------------------------------------------


def after_value(prev: IdState | None, rec: TxnLogRecord) -> tuple[IdState, Transition, int]:
    """The id's state after a value record, the record's transition, and by how much the epoch rose."""
    state = rec.state
    assert state is not None  # a value record always has one (TxnState.UNKNOWN for a status byte we do not know)
    events: list[str] = []
    tally: Tally
    if prev is None:
        bump, abort, client_tv, tally = 0, None, None, _NO_TALLY
        events.append(NEW)
        if rec.previous_producer_id is not None and rec.previous_producer_id != rec.producer_id:
            events.append(PRODUCER_ID_CHANGE)  # only the tag knows: the id's earlier records were never read
    else:
        tally = prev[12:]  # its five counts (a test checks the names)
        bump = _identity_move(prev, rec, events)
        if prev.state not in _MAY_PRECEDE[state]:
            events.append(ILLEGAL_TRANSITION)
        client_tv = prev.client_tv if rec.producer_id == prev.producer_id else None
        rule = _REACHING.get(state)
        abort = rule(prev, rec, events, bump) if rule is not None else None
    duration = _settled(prev, rec, events) if state in _COMPLETE else None
    if state is PREPARE_COMMIT:
        client_tv = rec.client_transaction_version
    elif state is UNKNOWN:
        events.append(UNKNOWN_STATE)
    if rec.unknown_tags or rec.problem:
        events.append(UNKNOWN_FIELDS)
    if not _TALLIED.isdisjoint(events):
        tally = _tallied(tally, events, bump)
    # The id's state: the record's own fields, how its abort came about, the client's version, the counts;
    # a plain tuple in IdState's order (a test reads the fields back by name): a keyword build of the 17
    # fields costs five times as much, once per record.
    (tid, log_partition, offset, _, _, _, raw_status, producer_id, epoch, timeout_ms, partitions, last_update_ms,
     start_ms, was, next_pid, ctv, _, unknown_tags, problem, _, _) = rec  # one unpack, not ~30 attribute reads
    # (TxnLogRecord's field order is pinned by tests/unit/detect/test_txnlog.py)
    new = _new_tuple(IdState, (state, producer_id, epoch, timeout_ms, start_ms, last_update_ms, partitions, ctv,
                               client_tv, abort, log_partition, offset, *tally))
    # The transition row (a plain tuple in Transition's order, as the id's state).
    to_state = _NAME[state] if state is not UNKNOWN else f"Unknown({raw_status})"
    detail = (_value_detail(rec) if raw_status is not None or unknown_tags or problem or next_pid is not None
              else None)
    if prev is None:  # the tag names the producer id the id came from, if another
        from_state, prev_producer_id, prev_producer_epoch = None, was if was != producer_id else None, None
    elif was is None or was == prev.producer_id:
        from_state, prev_producer_id, prev_producer_epoch = _NAME[prev.state], prev.producer_id, prev.producer_epoch
    else:  # the tag links another producer id than the last one read: its epoch is not known
        from_state, prev_producer_id, prev_producer_epoch = _NAME[prev.state], was, None
    return new, _new_tuple(Transition, (
        tid, last_update_ms, log_partition, offset, from_state, to_state, producer_id, epoch, prev_producer_id,
        prev_producer_epoch, timeout_ms, start_ms, partitions, tuple(events), duration, ctv, detail, _LOG)), bump


_COMPLETE = frozenset({COMPLETE_COMMIT, COMPLETE_ABORT})
#: Kafka's valid previous states of each state, where an unknown state (before or after) is never illegal.
_MAY_PRECEDE = {state: VALID_PREVIOUS.get(state, frozenset(TxnState)) | {UNKNOWN} for state in TxnState}


def _identity_move(prev: IdState, rec: TxnLogRecord, events: list[str]) -> int:
    """A new producer id, or an epoch bump within the producer id (by how much: the return value).

    The producer id before the record is the PreviousProducerId tag when the record carries it (Kafka 4.3+),
    else the one of the id's previous record."""
    was = rec.previous_producer_id
    if was is None:
        was = prev.producer_id
    if rec.producer_id != was:
        events.append(PRODUCER_ID_CHANGE)
        return 0
    if was != prev.producer_id:
        return 0  # the tag says the id moved in records txnwatch did not read: no bump to measure here
    if rec.producer_epoch > prev.producer_epoch:
        events.append(EPOCH_BUMP)
        return rec.producer_epoch - prev.producer_epoch
    return 0


def _settled(prev: IdState | None, rec: TxnLogRecord, events: list[str]) -> int | None:
    """Complete*: the outcome, once per transaction (a repeat of the same producer id and epoch is none),
    and the transaction's duration."""
    if (prev is not None and prev.state is rec.state and prev.producer_epoch == rec.producer_epoch
            and prev.producer_id == rec.producer_id):
        return None
    events.append(COMMIT if rec.state is COMPLETE_COMMIT else ABORT)
    return max(0, rec.last_update_ms - rec.start_ms) if rec.start_ms is not None else None


def _tallied(tally: Tally, events: list[str], bump: int) -> Tally:
    """The running counts after the record: each counted event adds one, an epoch bump adds its size."""
    commits, aborts, bumps, fences, timeouts = tally
    return (commits + (COMMIT in events), aborts + (ABORT in events), bumps + (bump if EPOCH_BUMP in events else 0),
            fences + (FENCED in events), timeouts + (TIMEOUT_ABORT in events))


_TALLIED = frozenset({COMMIT, ABORT, EPOCH_BUMP, FENCED, TIMEOUT_ABORT})


def _value_detail(rec: TxnLogRecord) -> str:
    """The coming rotation NextProducerId announces, then what about the record this txnwatch does not know, raw:
    the problem, the status byte, tagged fields."""
    return "; ".join(filter(None, (
        _rotation_detail(rec) if rec.next_producer_id is not None else None,
        rec.problem, f"transaction status {rec.raw_status}" if rec.raw_status is not None else None,
        ", ".join(f"tagged field {tag} = {raw.hex()[:256]}" for tag, raw in rec.unknown_tags) or None)))


def _rotation_detail(rec: TxnLogRecord) -> str:
    """NextProducerId (and NextProducerEpoch, Kafka 4.3+) as on-call reads it: where the id goes next."""
    epoch = f" epoch {rec.next_producer_epoch}" if rec.next_producer_epoch is not None else ""
    return f"next producer id {rec.next_producer_id}{epoch}: the id moves to it when this transaction completes"



# --- the rule of each state reached (from a known previous state) ------------------------------------------
# Each appends the events the move means and returns how the current abort came about (None outside aborts).

Rule = Callable[[IdState, TxnLogRecord, list[str], int], str | None]


def _to_prepare_abort(prev: IdState, rec: TxnLogRecord, events: list[str], bump: int) -> str | None:
    """Who aborts: the client's EndTxn, the coordinator after the timeout, or a new instance's fence."""
    if prev.state is ONGOING and rec.producer_id == prev.producer_id:
        abort = _abort_origin(prev, rec.producer_epoch, rec.client_transaction_version)
        return abort if abort == ABORT_CLIENT else _timeout_or_fence(prev, rec, events, abort)
    if prev.state is FENCE:
        return ABORT_SERVER if prev.abort is None else prev.abort
    return ABORT_CLIENT


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


def _timeout_or_fence(prev: IdState, rec: TxnLogRecord, events: list[str], abort: str) -> str:
    """An abort the client did not (or may not) write over an Ongoing transaction: past the transaction's
    timeout it is the coordinator's timeout abort; else a bump only the coordinator makes is a fence."""
    start = rec.start_ms if rec.start_ms is not None else prev.start_ms
    if start is not None and rec.last_update_ms - start >= prev.timeout_ms:
        events.append(TIMEOUT_ABORT)
        return ABORT_TIMEOUT
    if abort == ABORT_SERVER and prev.abort != ABORT_SERVER:
        events.append(FENCED)
    return abort


def _to_fence(prev: IdState, rec: TxnLogRecord, events: list[str], bump: int) -> str | None:
    """PrepareEpochFence: a new instance fences the open transaction (once, if not already the server's abort)."""
    if prev.abort != ABORT_SERVER:
        events.append(FENCED)
    return ABORT_SERVER


def _to_complete_abort(prev: IdState, rec: TxnLogRecord, events: list[str], bump: int) -> str | None:
    """The abort completes as it began."""
    return prev.abort


def _to_empty(prev: IdState, rec: TxnLogRecord, events: list[str], bump: int) -> str | None:
    """Empty with a bump or a new producer id is InitProducerId: it proves a TV2 abort just before was a
    fence; after a finished transaction it is a producer (re)starting."""
    if bump or rec.producer_id != prev.producer_id:
        if prev.state is COMPLETE_ABORT and prev.abort == ABORT_AMBIGUOUS:
            events.append(FENCED)
        elif prev.state not in _OPEN:
            events.append(INIT_PRODUCER_ID)
    return None


#: The rule of each state a value record reaches; states without one (Ongoing, PrepareCommit, Dead...)
#: mean nothing beyond the identity move and the move's legality.
_REACHING: dict[TxnState, Rule] = {
    PREPARE_ABORT: _to_prepare_abort,
    FENCE: _to_fence,
    COMPLETE_ABORT: _to_complete_abort,
    EMPTY: _to_empty,
}


# --- records without a value ------------------------------------------------------------------------------


def after_other(prev: IdState | None, rec: TxnLogRecord) -> Transition:
    """A tombstone (the id expired) or an undecodable value (the id's state stays as it was)."""
    if rec.kind is TxnLogKind.TOMBSTONE:
        return _without_value(prev, rec, DEAD, EXPIRED, None)
    return _without_value(prev, rec, UNKNOWN, UNKNOWN_RECORD,
                          f"{rec.problem}; raw value {(rec.raw_value or b'').hex()[:512]}")


#: What a record without a value says about an id never seen before: nothing (no producer, no epoch).
_UNSEEN = IdState(UNKNOWN, -1, -1, 0, None, 0, (), 0, None, None, -1, -1)


def _without_value(prev: IdState | None, rec: TxnLogRecord, to_state: TxnState, event: str,
                   detail: str | None) -> Transition:
    """The transition row of a record without a value: the id as it was, the record's position and time."""
    was = prev or _UNSEEN
    return Transition(
        transactional_id=rec.transactional_id, at_ms=rec.timestamp_ms or 0, log_partition=rec.log_partition,
        log_offset=rec.offset, from_state=_NAME[was.state] if prev else None, to_state=to_state.value,
        producer_id=was.producer_id, producer_epoch=was.producer_epoch,
        prev_producer_id=was.producer_id if prev else None, prev_producer_epoch=was.producer_epoch if prev else None,
        timeout_ms=was.timeout_ms, start_ms=was.start_ms, partitions=(), events=(event,), duration_ms=None,
        client_transaction_version=was.client_transaction_version, detail=detail, source=_LOG)
