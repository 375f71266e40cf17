"""Hanging transactions, as Kafka's `kafka-transactions.sh find-hanging` decides them, and their kin.

Kafka's rule (TransactionsCommand.FindHangingTransactionsCommand): a producer with an
open transaction on a partition (currentTxnStartOffset set) whose last write is older
than ``transaction.max.timeout.ms`` is a candidate; it hangs if no coordinator lists a
transactional id for its producer id, if the coordinator no longer knows that id, or
if the coordinator's transaction does not include the partition.  txnwatch adds one
rule that Kafka's tool meets only by racing: the id listed for the producer id is now
described with another producer id (the coordinator moved on).  Only the third case
needs a word: DescribeTransactions lists every partition of an ongoing transaction and
every partition still waiting for its marker in Prepare*, so a partition missing from
that list will never receive a marker.

With a ``transactional_id_pattern`` (tenancy) the listing names only the ids in scope, so a candidate
whose producer id is not listed is undetermined (another tenant's, or no id), never "no id".

Where Kafka's tool would fail on an unanswered request, txnwatch keeps going, and a
candidate whose coordinator could not be asked is *undetermined*, never hanging: a
coordinator failover must not page anyone.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from txnwatch.core.findings import HangingTransaction, OverdueTransaction, StuckPrepare, Undetermined
from txnwatch.core.model import (
    ClusterSnapshot,
    HangingReason,
    ListedTransaction,
    RequestError,
    TopicPartition,
    TxnState,
)
from txnwatch.detect.settings import DetectionSettings

#: Matched by name: the Kafka layer names every error (kafka-python's name for the wire code).
_NOT_FOUND = "TRANSACTIONAL_ID_NOT_FOUND"


def _listings_by_producer(snapshot: ClusterSnapshot) -> dict[int, list[ListedTransaction]]:
    found: dict[int, list[ListedTransaction]] = {}
    for row in snapshot.listed:
        found.setdefault(row.producer_id, []).append(row)
    return found


def _describe_errors(snapshot: ClusterSnapshot) -> dict[str, RequestError]:
    return {e.target: e for e in snapshot.errors if e.api == "DescribeTransactions"}


def _judge(snapshot: ClusterSnapshot, tp: TopicPartition, producer_id: int, listings: list[ListedTransaction],
           describe_errors: Mapping[str, RequestError]) -> tuple[HangingReason | None, str | None,
                                                               ListedTransaction | None]:
    """(reason, why-undetermined, listing) for one candidate; at most one of the first two is set.

    Kafka's tool maps a producer id to one transactional id (the last listing wins); a
    producer id has one id in practice, so any listing whose transaction includes the
    partition clears the candidate, and only then do the others count as evidence.
    """
    if not listings:
        if snapshot.transactional_id_pattern is not None:
            # The listing holds only the ids in scope: an id outside it and no id at all look the same here.
            return None, f"no transactional id matching {snapshot.transactional_id_pattern!r} names this producer", None
        if snapshot.listing_complete:
            return HangingReason.NO_TRANSACTIONAL_ID, None, None
        return None, "ListTransactions failed on some broker; the id may live there", None
    verdicts: list[tuple[HangingReason | None, str | None, ListedTransaction]] = []
    for listing in listings:
        txn_id, coordinator = listing.transactional_id, listing.coordinator_id
        description = snapshot.transactions.get(txn_id)
        error = describe_errors.get(txn_id)
        if coordinator in snapshot.unreachable_coordinators:
            verdicts.append((None, f"coordinator {coordinator} did not answer DescribeTransactions", listing))
        elif description is None:
            if error is not None and error.name == _NOT_FOUND:
                verdicts.append((HangingReason.UNKNOWN_TO_COORDINATOR, None, listing))
            else:
                why = f"DescribeTransactions({txn_id}) failed: {error.name}" if error else f"{txn_id} not described"
                verdicts.append((None, why, listing))
        elif tp in description.partitions:
            if description.producer_id == producer_id:
                return None, None, listing
            verdicts.append((HangingReason.PRODUCER_ID_MISMATCH, None, listing))
        elif description.producer_id != producer_id:
            verdicts.append((HangingReason.PRODUCER_ID_MISMATCH, None, listing))
        else:
            verdicts.append((HangingReason.PARTITION_NOT_LISTED, None, listing))
    unknown = [v for v in verdicts if v[0] is None]
    return unknown[0] if unknown else verdicts[-1]


def find_hanging(snapshot: ClusterSnapshot, now_ms: int, settings: DetectionSettings,
                 known_open: Mapping[TopicPartition, Collection[int]] | None = None,
                 ) -> tuple[list[HangingTransaction], list[Undetermined]]:
    """Kafka's find-hanging over one snapshot, with "could not ask" kept apart from "hanging".

    The age is ``now - lastTimestamp`` of the producer on the partition, strictly greater
    than the threshold, exactly as the Java tool measures it.  The producer's epoch is
    not compared with the coordinator's: with transaction version 2 (KIP-890) every
    transaction end bumps the epoch, so the two legitimately differ while the marker is
    on its way, and Kafka's tool does not compare them either.
    """
    threshold_ms = snapshot.max_transaction_timeout_ms + settings.hanging_margin_ms
    by_producer = _listings_by_producer(snapshot)
    describe_errors = _describe_errors(snapshot)
    hanging: list[HangingTransaction] = []
    undetermined: list[Undetermined] = []
    for tp, partition in sorted(snapshot.partitions.items()):
        if partition.producers is None:
            # Name the producers last seen with open transactions here, so an incident about
            # one of them is carried over rather than resolved while the leader is silent.
            pids: list[int | None] = [*sorted((known_open or {}).get(tp, ()))] or [None]
            undetermined.extend(Undetermined(snapshot.cluster, tp, pid, "DescribeProducers failed") for pid in pids)
            continue
        for producer in partition.producers:
            start, last_ms = producer.current_txn_start_offset, producer.last_timestamp_ms
            if start is None or last_ms is None or now_ms - last_ms <= threshold_ms:
                continue
            reason, why, listing = _judge(snapshot, tp, producer.producer_id,
                                          by_producer.get(producer.producer_id, []), describe_errors)
            txn_id = listing.transactional_id if listing else None
            coordinator = listing.coordinator_id if listing else None
            if why is not None:
                undetermined.append(Undetermined(snapshot.cluster, tp, producer.producer_id, why, txn_id, coordinator))
            elif reason is not None:
                hanging.append(HangingTransaction(
                    cluster=snapshot.cluster, tp=tp, producer_id=producer.producer_id,
                    producer_epoch=producer.producer_epoch, coordinator_epoch=producer.coordinator_epoch,
                    transactional_id=txn_id, coordinator_id=coordinator, reason=reason, txn_start_offset=start,
                    last_timestamp_ms=last_ms, age_ms=now_ms - last_ms))
    return hanging, undetermined


def find_overdue(snapshot: ClusterSnapshot, now_ms: int, settings: DetectionSettings) -> list[OverdueTransaction]:
    """Ongoing past its own timeout: the coordinator's abort did not happen (overloaded or stuck coordinator)."""
    overdue = []
    for txn in snapshot.transactions.values():
        if txn.state is not TxnState.ONGOING or txn.start_time_ms is None:
            continue
        age_ms = now_ms - txn.start_time_ms
        if age_ms > txn.timeout_ms + settings.timeout_grace_ms:
            overdue.append(OverdueTransaction(snapshot.cluster, txn.transactional_id, txn.producer_id,
                                              txn.producer_epoch, txn.state, txn.start_time_ms, txn.timeout_ms,
                                              age_ms, txn.partitions))
    return overdue


PrepareKey = tuple[TxnState, int, int, int | None]


def track_prepare(previous: Mapping[str, tuple[PrepareKey, int]], snapshot: ClusterSnapshot,
                  now_ms: int) -> dict[str, tuple[PrepareKey, int]]:
    """When each transaction entered its current Prepare* state (first poll that saw it there)."""
    since: dict[str, tuple[PrepareKey, int]] = {}
    for txn in snapshot.transactions.values():
        if not txn.state.is_prepare:
            continue
        key: PrepareKey = (txn.state, txn.producer_id, txn.producer_epoch, txn.start_time_ms)
        seen = previous.get(txn.transactional_id)
        since[txn.transactional_id] = seen if seen is not None and seen[0] == key else (key, now_ms)
    # An id this poll could not describe keeps its clock: a coordinator that stops answering
    # must not restart the count of the very transaction it may be stuck on.
    listed = {row.transactional_id for row in snapshot.listed}
    for txn_id, value in previous.items():
        if txn_id not in snapshot.transactions and (txn_id in listed or not snapshot.listing_complete):
            since.setdefault(txn_id, value)
    return since


def find_stuck_prepare(since: Mapping[str, tuple[PrepareKey, int]], snapshot: ClusterSnapshot, now_ms: int,
                       settings: DetectionSettings) -> list[StuckPrepare]:
    """Prepare* longer than the threshold, measured from the first poll that saw it.

    A transaction whose coordinator went silent stays reported (its clock kept by
    :func:`track_prepare`): not knowing is no reason to resolve a stuck commit.
    """
    stuck = []
    for txn_id, ((state, producer_id, epoch, _), entered_ms) in since.items():
        duration = now_ms - entered_ms
        if duration > settings.prepare_stuck_ms:
            txn = snapshot.transactions.get(txn_id)
            stuck.append(StuckPrepare(snapshot.cluster, txn_id, producer_id, epoch, state, entered_ms, duration,
                                      txn.partitions if txn else frozenset()))
    return stuck
