"""A transaction-version-2 hanging transaction, made the way production makes one (KAFKA-20716).

Partition verification (KIP-890) stops the pre-KIP-890 hanging transaction: a batch the
coordinator never heard of is refused.  What it cannot stop is a replica losing a marker
the coordinator already wrote.  With ``unclean.leader.election.enable`` on the topic:

1. a TV2 transaction writes its records to the leader L, acks=all, so the follower F has them too;
2. F stops (controlled shutdown: it leaves the ISR), and with ``min.insync.replicas=1`` the
   commit goes through: the coordinator writes the COMMIT marker to L alone and completes;
3. L stops; the partition is offline; F starts and is elected by an unclean election
   (ElectLeaders UNCLEAN, what ``kafka-leader-election --election-type unclean`` sends);
4. F holds the records but not the marker, so its producer state has an open transaction that
   no coordinator will ever end; L comes back, truncates to F's log and loses the marker too.

The partition's LSO stays at the transaction's first offset; the coordinator says CompleteCommit
and lists no partition, which is exactly what Kafka's ``find-hanging`` calls hanging.

The transaction is driven by hand over the wire with TV2's requests (InitProducerId, Produce
v12+ so the leader adds the partition itself, EndTxn v5 whose marker carries the bumped epoch):
kafka-python's producer speaks transaction version 1 only, and the point is a TV2 transaction.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import kafka.errors as Errors
from kafka.admin import AbortTransactionSpec
from kafka.protocol.producer import EndTxnRequest, InitProducerIdRequest

from txnwatch.lab.errors import LabError
from txnwatch.lab.faults import Fault, transactional_produce, unique_transactional_id
from txnwatch.lab.wire import find_transaction_coordinator, partition_leaders, send

if TYPE_CHECKING:
    from txnwatch.lab.cluster import LabCluster

#: Topic configs the fault needs: an unclean election allowed, and a commit accepted by the leader alone.
UNCLEAN_TOPIC_CONFIGS = {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}
#: Broker properties: with 2 brokers the lab's state-log min ISR is 2, and the coordinator could not complete the
#: commit while the follower is down.
UNCLEAN_BROKER_PROPERTIES = {"transaction.state.log.min.isr": "1"}
_UNCLEAN = 1  # ElectionType.UNCLEAN
_RETRIABLE = (Errors.CoordinatorLoadInProgressError, Errors.NotCoordinatorError, Errors.CoordinatorNotAvailableError,
              Errors.ConcurrentTransactionsError, Errors.NotLeaderForPartitionError,
              Errors.NotEnoughReplicasError, Errors.KafkaConnectionError, Errors.KafkaTimeoutError,
              Errors.NodeNotReadyError, Errors.ElectionNotNeededError, Errors.EligibleLeadersNotAvailableError,
              Errors.UnknownTopicOrPartitionError, Errors.LeaderNotAvailableError, KeyError, IndexError)


@dataclass
class LostMarkerTxn(Fault):
    """The hanging transaction on the new leader: producer id, the epoch of its records, where it starts."""

    lab: LabCluster
    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    #: The epoch the coordinator ended the transaction with (TV2 bumps it in EndTxn).
    committed_epoch: int
    first_offset: int
    old_leader: int
    new_leader: int

    def _clear(self) -> None:
        admin = self.lab.admin()
        try:
            tp = _tp(self.topic, self.partition)
            state = admin.describe_producers([tp])[tp]
            ours = [p for p in state.active_producers if p.producer_id == self.producer_id]
            if ours and ours[0].current_transaction_start_offset >= 0:
                admin.abort_transaction(AbortTransactionSpec(tp, self.producer_id, ours[0].producer_epoch,
                                                             max(ours[0].coordinator_epoch, 0)))
        finally:
            admin.close()


def _tp(topic: str, partition: int) -> Any:
    from kafka import TopicPartition

    return TopicPartition(topic, partition)


def _until(call: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Retry `call` on retriable errors and on answers None or False; its first other answer is returned."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = call()
            if result is not None and result is not False:
                return result
        except _RETRIABLE as exc:
            last = exc
        time.sleep(0.3)
    raise LabError(f"lost-marker fault: {what} did not happen within {timeout:.0f}s (last error: {last!r})")


def _check(code: int, what: str) -> None:
    error = Errors.for_code(code)
    if error is not Errors.NoError:
        raise error(what)


def _isr(admin: Any, topic: str, partition: int) -> list[int]:
    parts = admin.describe_topics([topic])[0]["partitions"]
    return list(next((p["isr_nodes"] for p in parts if p["partition_index"] == partition), []))


def lose_commit_marker(lab: LabCluster, topic: str, partition: int = 0, *, records: int = 2,
                       transaction_timeout_ms: int = 10_000) -> LostMarkerTxn:
    """Make the fault on `topic` (replication factor 2, UNCLEAN_TOPIC_CONFIGS) of a 2-broker lab formatted with
    transaction version 2.  Returns once the new leader serves the partition with the transaction open and the
    old leader is back as its follower."""
    transactional_id = unique_transactional_id("txnwatch-lab-lost-marker")
    admin = lab.admin()
    try:
        # A fresh client may not know the topic yet: its first Metadata answer can predate the creation.
        leader = _until(lambda: (node := partition_leaders(admin, topic).get(partition, -1)) >= 0 and node,
                        f"a leader for {topic}-{partition}")
        replicas = _until(lambda: len(isr := _isr(admin, topic, partition)) == 2 and isr, "both replicas in sync")
        follower = next(r for r in replicas if r != leader)

        coordinator = _until(lambda: find_transaction_coordinator(admin, transactional_id), "FindCoordinator")

        def init() -> Any:
            answer = send(admin, InitProducerIdRequest(transactional_id=transactional_id,
                                                       transaction_timeout_ms=transaction_timeout_ms,
                                                       producer_id=-1, producer_epoch=-1), node_id=coordinator)
            _check(answer.error_code, f"InitProducerId({transactional_id})")
            return answer

        init_answer = _until(init, "InitProducerId")
        pid, epoch = int(init_answer.producer_id), int(init_answer.producer_epoch)

        # Produce v12: under transaction version 2 the leader adds the partition to the transaction itself.
        result = transactional_produce(admin, leader, transactional_id, topic, partition, pid, epoch,
                                       [f"lost-marker-{i}".encode() for i in range(records)], key=b"lost-marker",
                                       versions=(12, 12), timeout_ms=15_000)
        _check(result.error_code, f"transactional Produce v12 to {topic}-{partition}")
        first_offset = int(result.base_offset)

        lab.stop_broker(follower)
        _until(lambda: _isr(admin, topic, partition) == [leader], f"node {follower} out of the ISR")

        def commit() -> Any:
            node = find_transaction_coordinator(admin, transactional_id)
            answer = send(admin, EndTxnRequest(transactional_id=transactional_id, producer_id=pid,
                                               producer_epoch=epoch, committed=True, min_version=5), node_id=node)
            _check(answer.error_code, f"EndTxn v5({transactional_id})")
            return answer

        committed = _until(commit, "EndTxn (commit) with the follower down")
        committed_epoch = int(committed.producer_epoch)
        tp = _tp(topic, partition)
        _until(lambda: not [p for p in admin.describe_producers([tp])[tp].active_producers
                            if p.producer_id == pid and p.current_transaction_start_offset >= 0],
               f"the COMMIT marker on node {leader}")

        lab.stop_broker(leader)
        # Not lab.start_broker's wait, which insists that every broker is alive: the election below is the wait.
        lab.start_broker(follower, wait=False)
        _until(lambda: _elect_unclean(lab, topic, partition) == follower, f"unclean election of node {follower}",
               timeout=120.0)
        lab.start_broker(leader)
        _until(lambda: sorted(_isr(admin, topic, partition)) == sorted([leader, follower]),
               f"node {leader} back in the ISR")
        return LostMarkerTxn(lab=lab, transactional_id=transactional_id, topic=topic, partition=partition,
                             producer_id=pid, producer_epoch=epoch, committed_epoch=committed_epoch,
                             first_offset=first_offset, old_leader=leader, new_leader=follower)
    finally:
        admin.close()


def _elect_unclean(lab: LabCluster, topic: str, partition: int) -> int:
    """One ElectLeaders UNCLEAN round (its own admin client: the old one may still point at the stopped broker)."""
    admin = lab.admin()
    try:
        admin.elect_leaders(_UNCLEAN, {topic: [partition]}, timeout_ms=10_000)
        return int(partition_leaders(admin, topic)[partition])
    finally:
        admin.close()
