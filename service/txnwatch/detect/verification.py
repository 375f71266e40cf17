"""KIP-890-style verification metrics, measured from outside the brokers.

KIP-890 has the partition leader ask the coordinator whether a producer's partition
is part of its transaction before accepting a transactional write, and reports how
long that takes (VerificationTimeMs) and how often it fails (VerificationFailureRate).
txnwatch measures the same agreement from the two public views: the time from the
first poll that sees an open transaction on a partition (DescribeProducers) to the
first poll whose coordinator lists that partition (DescribeTransactions), and the
share of checks where, past a grace period, it still does not.  Resolution is the
poll interval; the value of the metric is in the failures and the tail.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from txnwatch.core.findings import VerificationCheck, VerificationOutcome
from txnwatch.core.model import ClusterSnapshot, TopicPartition
from txnwatch.detect.settings import DetectionSettings

#: A partition's open transaction: (partition, producer id, first offset of the transaction).
OpenKey = tuple[TopicPartition, int, int]


@dataclass(frozen=True, slots=True)
class Pending:
    """One open (partition, producer, start offset) across polls.

    ``agreed_ms`` is the last poll at which the coordinator listed the partition: the
    grace period runs from there (or from the first sighting), so a transaction that
    just completed — the coordinator cleared its partitions, the partition's own
    view has not caught up within this poll — is not a failure however long it ran.
    ``written_ms`` is set only in the first poll of a leadership term: a client adds a
    partition to its transaction before writing to it, so an open transaction whose
    last write is older than the grace and that its coordinator does not list is a
    failure now, not one grace period after a restart.
    """

    first_seen_ms: int
    verified: bool = False
    failed: bool = False
    agreed_ms: int | None = None
    written_ms: int | None = None

    def grace_from(self) -> int:
        if self.agreed_ms is not None:
            return self.agreed_ms
        return self.first_seen_ms if self.written_ms is None else min(self.first_seen_ms, self.written_ms)


def _coordinator_view(snapshot: ClusterSnapshot, producer_id: int,
                      tp: TopicPartition) -> tuple[bool | None, str | None]:
    """True/False: the coordinator does/doesn't list the partition; None: we could not ask."""
    ids = snapshot.transactional_ids_for_producer(producer_id)
    if not ids:
        return (False if snapshot.listing_complete else None), None
    for txn_id in ids:
        txn = snapshot.transactions.get(txn_id)
        if txn is not None and txn.producer_id == producer_id and tp in txn.partitions:
            return True, txn_id
    if any(snapshot.transactions.get(t) is None for t in ids):
        return None, ids[0]
    return False, ids[0]


def _ending(snapshot: ClusterSnapshot, transactional_id: str | None) -> bool:
    """Committing or aborting: the partition may still show it open while the coordinator lists nothing."""
    txn = snapshot.transactions.get(transactional_id) if transactional_id else None
    return txn is not None and (txn.state.is_prepare or txn.state.is_complete)


def check(previous: Mapping[OpenKey, Pending], snapshot: ClusterSnapshot, now_ms: int,
          settings: DetectionSettings, resumed: bool = False) -> tuple[dict[OpenKey, Pending], VerificationCheck]:
    """One check per open (partition, producer) pair whose coordinator could be asked; ``resumed``: the first
    poll of a leadership term, whose open transactions began before anyone watched them."""
    pending: dict[OpenKey, Pending] = {}
    samples: list[VerificationOutcome] = []
    checks = failures = 0
    failing: list[tuple[TopicPartition, int, str | None]] = []
    for tp, partition in snapshot.partitions.items():
        if partition.producers is None:
            pending.update({k: v for k, v in previous.items() if k[0] == tp})  # unknown: keep the clocks
            continue
        for producer in partition.producers:
            if producer.current_txn_start_offset is None:
                continue
            key = (tp, producer.producer_id, producer.current_txn_start_offset)
            listed, txn_id = _coordinator_view(snapshot, producer.producer_id, tp)
            state = previous.get(key) or Pending(
                first_seen_ms=now_ms,
                written_ms=producer.last_timestamp_ms if resumed and not _ending(snapshot, txn_id) else None)
            if listed is not None:
                checks += 1
                if listed:
                    if not state.verified:
                        samples.append(VerificationOutcome(snapshot.cluster, tp, producer.producer_id, txn_id,
                                                          now_ms, now_ms - state.first_seen_ms, failed=False))
                    state = replace(state, verified=True, agreed_ms=now_ms)
                elif now_ms - state.grace_from() > settings.verification_grace_ms:
                    failures += 1
                    failing.append((tp, producer.producer_id, txn_id))
                    if not state.failed:
                        samples.append(VerificationOutcome(snapshot.cluster, tp, producer.producer_id, txn_id,
                                                          now_ms, None, failed=True))
                        state = replace(state, failed=True)
            pending[key] = state
    return pending, VerificationCheck(checks, failures, tuple(samples), tuple(sorted(failing, key=lambda f: (f[0], f[1]))))


def resume(unlisted: Mapping[OpenKey, int]) -> dict[OpenKey, Pending]:
    """Open transactions an earlier term found unlisted (its open hanging episodes), failed since the given time.

    Besides the failure count, they name the producers of a partition whose DescribeProducers
    fails in the first poll, so a hanging incident there stays undecided instead of resolving.
    """
    return {key: Pending(first_seen_ms=since_ms, failed=True) for key, since_ms in unlisted.items()}


def open_producers(pending: Mapping[OpenKey, Pending]) -> dict[TopicPartition, frozenset[int]]:
    """Producer ids last seen with an open transaction, per partition."""
    found: dict[TopicPartition, set[int]] = {}
    for tp, producer_id, _ in pending:
        found.setdefault(tp, set()).add(producer_id)
    return {tp: frozenset(pids) for tp, pids in found.items()}
