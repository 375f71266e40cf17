"""Small builders for snapshots, so each test states only what it is about."""

from __future__ import annotations

from txnwatch.core.model import (
    ClusterSnapshot,
    GroupSnapshot,
    ListedTransaction,
    PartitionSnapshot,
    ProducerState,
    RequestError,
    TopicPartition,
    TransactionDescription,
    TxnState,
)

TP = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
MAX_TIMEOUT = 900_000


def producer(pid: int = 7, epoch: int = 0, start: int | None = 10, last_ms: int | None = 0,
             coordinator_epoch: int = 0) -> ProducerState:
    return ProducerState(producer_id=pid, producer_epoch=epoch, last_sequence=4, last_timestamp_ms=last_ms,
                         coordinator_epoch=coordinator_epoch, current_txn_start_offset=start)


def partition(tp: TopicPartition = TP, hwm: int | None = 20, lso: int | None = 10,
              producers: tuple[ProducerState, ...] | None = ()) -> PartitionSnapshot:
    return PartitionSnapshot(tp, leader=1, high_watermark=hwm, last_stable_offset=lso, log_start_offset=0,
                             producers=producers)


def txn(txn_id: str = "app-1", pid: int = 7, epoch: int = 0, state: TxnState = TxnState.ONGOING,
        partitions: tuple[TopicPartition, ...] = (TP,), start: int | None = 0, timeout: int = 60_000,
        coordinator: int = 1) -> TransactionDescription:
    return TransactionDescription(txn_id, coordinator, state, pid, epoch, timeout, start, frozenset(partitions))


def snapshot(*, partitions: tuple[PartitionSnapshot, ...] = (), txns: tuple[TransactionDescription, ...] = (),
             listed: tuple[ListedTransaction, ...] | None = None, at: int = 0, complete: bool = True,
             unreachable: frozenset[int] = frozenset(), errors: tuple[RequestError, ...] = (),
             groups: tuple[GroupSnapshot, ...] = (), pattern: str | None = None) -> ClusterSnapshot:
    if listed is None:
        listed = tuple(ListedTransaction(t.transactional_id, t.producer_id, t.state, t.coordinator_id) for t in txns)
    return ClusterSnapshot(cluster="c", taken_at_ms=at, duration_ms=5,
                           listed=listed, transactions={t.transactional_id: t for t in txns},
                           partitions={p.tp: p for p in partitions}, groups={g.group_id: g for g in groups},
                           errors=errors, listing_complete=complete, unreachable_coordinators=unreachable,
                           max_transaction_timeout_ms=MAX_TIMEOUT, transactional_id_pattern=pattern)
