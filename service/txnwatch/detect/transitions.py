"""Coordinator history: every observed change of a transactional id, and what it means.

Polling samples the coordinator's state machine, so transitions in between can be
missed: Ongoing → CompleteCommit without the PrepareCommit in between is normal, and
a transaction may start and end between two polls.  The transaction's start time
(DescribeTransactions ``transactionStartTimeMs``) tells one transaction from the next
with the same producer id and epoch, which is what makes these inferences sound:

* commit / abort: the id reaches CompleteCommit / CompleteAbort for a transaction not
  seen completing before;
* timeout_abort: an abort with an epoch bump after the transaction outlived its
  ``transaction.timeout.ms`` — the coordinator's own abort (KIP-588: it bumps the epoch
  so the late producer is fenced);
* fenced: an epoch bump that is neither a timeout abort nor the per-transaction bump
  of KIP-890 transaction version 2 (which comes with the commit/abort itself): a new
  producer instance called InitProducerId with the same transactional id;
* producer_id_change: a new producer id for the same transactional id (KIP-360 epoch
  exhaustion or recovery from UNKNOWN_PRODUCER_ID);
* illegal_transition: the same transaction (same start time, producer id and epoch)
  going from PrepareCommit to an abort, or from PrepareAbort to a commit — the
  article's "COMMITTING -> ABORTING";
* expired: the id vanished from a complete listing (transactional.id.expiration.ms).
"""

from __future__ import annotations

from collections.abc import Mapping

from txnwatch.model import ClusterSnapshot, TransactionDescription, Transition, TxnState

_COMMITS = {TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT}
_ABORTS = {TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT}


def _signature(t: TransactionDescription) -> tuple[object, ...]:
    return (t.state, t.producer_id, t.producer_epoch, t.timeout_ms, t.partitions, t.start_time_ms)


def _fencing(prev: TransactionDescription, cur: TransactionDescription) -> bool:
    """A bump that a new producer instance's InitProducerId explains, and nothing else does.

    InitProducerId leaves the id Empty at a higher epoch, passes through
    PrepareEpochFence, and when it aborts its predecessor's open transaction bumps
    twice (fence, then init).  One bump that comes with a commit, an abort or a new
    Ongoing transaction is what KIP-890 transaction version 2 does at the end of
    every transaction, so it is not called fencing.
    """
    if cur.state in (TxnState.EMPTY, TxnState.PREPARE_EPOCH_FENCE):
        return True
    return cur.producer_epoch - prev.producer_epoch >= 2


def derive_events(prev: TransactionDescription | None, cur: TransactionDescription, now_ms: int) -> tuple[str, ...]:
    if prev is None:
        return ("new",)
    events: list[str] = []
    same_txn = prev.start_time_ms == cur.start_time_ms and prev.producer_id == cur.producer_id
    if cur.state is TxnState.COMPLETE_COMMIT and not (prev.state is TxnState.COMPLETE_COMMIT and same_txn):
        events.append("commit")
    if cur.state is TxnState.COMPLETE_ABORT and not (prev.state is TxnState.COMPLETE_ABORT and same_txn):
        events.append("abort")
    if (prev.state is TxnState.ONGOING and cur.state is TxnState.ONGOING and not same_txn
            and prev.producer_id == cur.producer_id):
        events.append("completed_between_polls")
    if cur.producer_id != prev.producer_id:
        events.append("producer_id_change")
    elif cur.producer_epoch > prev.producer_epoch:
        events.append("epoch_bump")
        outlived = (prev.state.is_open and prev.start_time_ms is not None
                    and now_ms - prev.start_time_ms >= prev.timeout_ms)
        if cur.state in _ABORTS and outlived:
            events.append("timeout_abort")
        elif _fencing(prev, cur):
            events.append("fenced")
    if (same_txn and prev.producer_epoch == cur.producer_epoch
            and ((prev.state is TxnState.PREPARE_COMMIT and cur.state in _ABORTS)
                 or (prev.state is TxnState.PREPARE_ABORT and cur.state in _COMMITS))):
        events.append("illegal_transition")
    return tuple(events)


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
        duration = (now_ms - cur.start_time_ms if cur.start_time_ms is not None
                    and cur.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT) else None)
        transitions.append(Transition(
            snapshot.cluster, txn_id, now_ms, prev.state if prev else None, cur.state, cur.producer_id,
            cur.producer_epoch, prev.producer_id if prev else None, prev.producer_epoch if prev else None,
            cur.timeout_ms, cur.start_time_ms, cur.partitions, events, duration))
    complete = snapshot.listing_complete and not snapshot.unreachable_coordinators
    for txn_id, prev in previous.items():
        if txn_id in snapshot.transactions:
            continue
        listed = any(row.transactional_id == txn_id for row in snapshot.listed)
        if complete and not listed:
            transitions.append(Transition(
                snapshot.cluster, txn_id, now_ms, prev.state, TxnState.DEAD, prev.producer_id, prev.producer_epoch,
                prev.producer_id, prev.producer_epoch, prev.timeout_ms, prev.start_time_ms, frozenset(), ("expired",)))
        else:
            remembered[txn_id] = prev  # not asked this time: remember, don't guess
    return remembered, transitions
