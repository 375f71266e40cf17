"""Small polling helpers shared by the lab tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kafka import TopicPartition
from kafka.protocol.consumer import IsolationLevel, OffsetSpec


def offsets(admin: Any, topic: str, partition: int) -> tuple[int, int]:
    """(LSO, high watermark): ListOffsets LATEST under read_committed and read_uncommitted."""
    tp = TopicPartition(topic, partition)
    hwm = admin.list_partition_offsets({tp: OffsetSpec.LATEST})[tp].offset
    lso = admin.list_partition_offsets({tp: OffsetSpec.LATEST}, isolation_level=IsolationLevel.READ_COMMITTED)[tp].offset
    return lso, hwm


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, interval: float = 0.2, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except Exception as exc:  # transient broker errors while the cluster heals
            last = exc
        if last and not isinstance(last, Exception):
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}: last={last!r}")


def fresh_txn_state(lab: Any, transactional_id: str) -> str:
    """The id's state through a new admin client: one that found the coordinator earlier can keep asking a broker
    that no longer coordinates the id (a stopped or restarted broker's partitions moved) and answer
    NotCoordinatorError until any wait runs out."""
    fresh = lab.admin()
    try:
        return str(txn_state(fresh, transactional_id).state.value)
    finally:
        fresh.close()


def txn_state(admin: Any, transactional_id: str, retry_for: float = 15.0) -> Any:
    """DescribeTransactions, riding out coordinator moves left behind by earlier failover tests."""
    from txnwatch.lab.faults import COORDINATOR_MOVING

    deadline = time.monotonic() + retry_for
    while True:
        try:
            return admin.describe_transactions([transactional_id])[transactional_id]
        except COORDINATOR_MOVING:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
