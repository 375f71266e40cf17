"""Coordinator history: every observed change of a transactional id, and what it means.

Polling samples the coordinator's state machine, so transitions in between are
missed: Ongoing → CompleteCommit without the PrepareCommit in between is normal, and
whole transactions start and end between two polls.  The transaction's start time
(DescribeTransactions ``transactionStartTimeMs``) tells one transaction from the next
with the same producer id, which is what keeps these inferences sound.  Epochs alone
cannot: with transaction version 2 (KIP-890 part 2) every commit and abort bumps the
epoch, so Ongoing at epoch e → Ongoing at e+k between two polls is simply k finished
transactions and a new one ("completed_between_polls"), neither fencing nor a timeout.

Events (a transition may carry several):

* new: first sighting of the id (also after a restart of txnwatch: not a real start);
* commit / abort: the id reaches CompleteCommit / CompleteAbort, or Prepare* of it,
  for a transaction not seen there before — Prepare* counts because markers are
  written asynchronously and the next poll may already see the next transaction;
* completed_between_polls: a different transaction of the same producer id is open
  now; its predecessor finished unseen, outcome unknown;
* epoch_bump / producer_id_change: the id's epoch rose, or it moved to a new producer
  id (KIP-360: epoch exhaustion, or recovery from UNKNOWN_PRODUCER_ID);
* timeout_abort: an open transaction that had outlived its ``transaction.timeout.ms``
  is now aborting or aborted with a bumped epoch — the coordinator's own abort (it bumps
  the epoch so the late producer is fenced, KIP-588);
* fenced: InitProducerId ended an open transaction before its timeout — the epoch rose
  and the id is in PrepareEpochFence, or went from open straight to Empty.  A bump that
  lands in Empty from a finished transaction is ``init_producer_id`` (a restart or a
  KIP-360 bump by the same instance; polling cannot tell them apart);
* illegal_transition: the same transaction moving against the state machine, e.g.
  PrepareCommit → PrepareAbort (the article's "COMMITTING -> ABORTING") or a completed
  transaction reopening: a state the one transaction cannot reach from the state seen
  before by Kafka's valid moves (``vocabulary.ILLEGAL_WITHIN_TRANSACTION``, derived from
  ``VALID_PREVIOUS``, the table the transaction log is judged by);
* expired: the id vanished from a complete listing (transactional.id.expiration.ms).

Stuck Prepare* is a duration, not a transition; :mod:`txnwatch.detect.hanging` reports it.
"""

from __future__ import annotations

from collections.abc import Mapping

from txnwatch.core.findings import Transition
from txnwatch.core.model import ClusterSnapshot, TransactionDescription
from txnwatch.core.vocabulary import ILLEGAL_WITHIN_TRANSACTION, TransitionSource, TxnEvent, TxnState

_POLL = TransitionSource.POLL

# States that show the outcome: Prepare* already decided it (markers are written asynchronously, and the
# next poll may see the next transaction), Complete* wrote it.
_COMMITS = frozenset({TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT})
_ABORTS = frozenset({TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT})


def _signature(t: TransactionDescription) -> tuple[object, ...]:
    return (t.state, t.producer_id, t.producer_epoch, t.timeout_ms, t.partitions, t.start_time_ms)


def _same_transaction(prev: TransactionDescription, cur: TransactionDescription) -> bool:
    return (prev.producer_id == cur.producer_id and prev.start_time_ms is not None
            and prev.start_time_ms == cur.start_time_ms)


def _outcome(prev: TransactionDescription, cur: TransactionDescription, same: bool) -> TxnEvent | None:
    for outcome, states in ((TxnEvent.COMMIT, _COMMITS), (TxnEvent.ABORT, _ABORTS)):
        if cur.state in states and not (same and prev.state in states):
            return outcome
    return None


def derive_events(prev: TransactionDescription | None, cur: TransactionDescription, now_ms: int) -> tuple[str, ...]:
    """What the move from ``prev`` to ``cur`` (both of one id, consecutive polls) implies; see the module doc."""
    if prev is None:
        return (TxnEvent.NEW.value,)
    events: list[TxnEvent] = []
    same = _same_transaction(prev, cur)
    if (outcome := _outcome(prev, cur, same)) is not None:
        events.append(outcome)
    if (prev.state.is_open and cur.state is TxnState.ONGOING and not same
            and prev.producer_id == cur.producer_id):
        events.append(TxnEvent.COMPLETED_BETWEEN_POLLS)
    if cur.producer_id != prev.producer_id:
        events.append(TxnEvent.PRODUCER_ID_CHANGE)
    elif cur.producer_epoch > prev.producer_epoch:
        events.append(TxnEvent.EPOCH_BUMP)
        outlived = (prev.state is TxnState.ONGOING and prev.start_time_ms is not None
                    and now_ms - prev.start_time_ms >= prev.timeout_ms)
        if outlived and cur.state in _ABORTS:
            events.append(TxnEvent.TIMEOUT_ABORT)
        elif cur.state is TxnState.PREPARE_EPOCH_FENCE or (prev.state.is_open and cur.state is TxnState.EMPTY):
            events.append(TxnEvent.FENCED)
        elif cur.state is TxnState.EMPTY:
            events.append(TxnEvent.INIT_PRODUCER_ID)
    if same and cur.state in ILLEGAL_WITHIN_TRANSACTION.get(prev.state, frozenset()):
        events.append(TxnEvent.ILLEGAL_TRANSITION)
    return tuple(event.value for event in events)


def diff(previous: Mapping[str, TransactionDescription], snapshot: ClusterSnapshot,
         now_ms: int) -> tuple[dict[str, TransactionDescription], list[Transition]]:
    """Returns (the coordinator view to remember, transitions observed in this poll)."""
    transitions: list[Transition] = []
    remembered = dict(snapshot.transactions)
    for txn_id, cur in snapshot.transactions.items():
        prev = previous.get(txn_id)
        if prev is not None and _signature(prev) == _signature(cur):
            continue
        events = derive_events(prev, cur, now_ms)
        # An upper bound: the transaction ended somewhere between the two polls.
        duration = (now_ms - cur.start_time_ms if cur.start_time_ms is not None
                    and cur.state.is_complete else None)
        transitions.append(Transition(
            transactional_id=txn_id, at_ms=now_ms, log_partition=None, log_offset=None,
            from_state=prev.state.value if prev else None, to_state=cur.state.value, producer_id=cur.producer_id,
            producer_epoch=cur.producer_epoch, prev_producer_id=prev.producer_id if prev else None,
            prev_producer_epoch=prev.producer_epoch if prev else None, timeout_ms=cur.timeout_ms,
            start_ms=cur.start_time_ms, partitions=tuple(sorted(cur.partitions)), events=events,
            duration_ms=duration, client_transaction_version=None, detail=None, source=_POLL))
    complete = snapshot.listing_complete and not snapshot.unreachable_coordinators
    for txn_id, prev in previous.items():
        if txn_id in snapshot.transactions:
            continue
        listed = any(row.transactional_id == txn_id for row in snapshot.listed)
        if complete and not listed:
            transitions.append(Transition(
                transactional_id=txn_id, at_ms=now_ms, log_partition=None, log_offset=None,
                from_state=prev.state.value, to_state=TxnState.DEAD.value, producer_id=prev.producer_id,
                producer_epoch=prev.producer_epoch, prev_producer_id=prev.producer_id,
                prev_producer_epoch=prev.producer_epoch, timeout_ms=prev.timeout_ms, start_ms=prev.start_time_ms,
                partitions=(), events=(TxnEvent.EXPIRED.value,), duration_ms=None, client_transaction_version=None,
                detail=None, source=_POLL))
        else:
            remembered[txn_id] = prev  # not asked this time: remember, don't guess
    return remembered, transitions
