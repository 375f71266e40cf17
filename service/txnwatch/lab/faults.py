"""Fault injection: make a real Kafka cluster show what it shows in production.

Every injector returns a handle whose `.clear()` undoes the fault (idempotent),
and whose fields carry the identifiers a test needs to find the fault again in
Kafka's own answers (producer id/epoch, partition, first offset, node ids).
Handles are context managers, so `with inject_...() as fault:` cleans up even
when an assertion fails.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import kafka.errors as Errors
from kafka import KafkaProducer, TopicPartition
from kafka.admin import AbortTransactionSpec
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record.default_records import DefaultRecordBatchBuilder

from txnwatch.core.vocabulary import TxnState
from txnwatch.lab.errors import LabError
from txnwatch.lab.wire import admin_client, find_transaction_coordinator, partition_leaders, send

if TYPE_CHECKING:
    from txnwatch.lab.cluster import LabCluster

#: What a coordinator answers while its `__transaction_state` partition moves or loads (a failover, a broker's
#: return, a preferred-leader election): a wait on that coordinator asks again.
COORDINATOR_MOVING = (Errors.CoordinatorLoadInProgressError, Errors.NotCoordinatorError,
                      Errors.CoordinatorNotAvailableError)
_RETRIABLE = (*COORDINATOR_MOVING, Errors.ConcurrentTransactionsError)


def unique_transactional_id(prefix: str = "txnwatch-lab") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


class Fault:
    """Base: idempotent clear() and context-manager support."""

    _cleared: bool = False

    def clear(self) -> None:
        if not self._cleared:
            self._cleared = True
            self._clear()

    def _clear(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.clear()


def transactional_producer(bootstrap: str, transactional_id: str, transaction_timeout_ms: int,
                           **overrides: Any) -> KafkaProducer:
    config: dict[str, Any] = dict(bootstrap_servers=bootstrap, transactional_id=transactional_id,
                                  transaction_timeout_ms=transaction_timeout_ms, linger_ms=0,
                                  request_timeout_ms=15_000, max_block_ms=30_000, retry_backoff_ms=100)
    config.update(overrides)
    producer = KafkaProducer(**config)
    producer.init_transactions()
    return producer


def _producer_id_and_epoch(producer: KafkaProducer) -> tuple[int, int]:
    pe = producer._transaction_manager.producer_id_and_epoch  # no public accessor in kafka-python
    return pe.producer_id, pe.epoch


def _retry(call: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except _RETRIABLE:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


# -- hanging transaction ---------------------------------------------------------------------------


@dataclass
class HangingTxn(Fault):
    """An open transaction on a partition that its coordinator never heard of.

    Built the way it happens in production before KIP-890: the producer got a
    producer id/epoch from InitProducerId, then a transactional batch reached
    the partition leader without AddPartitionsToTxn ever reaching the
    coordinator.  Nothing will ever write a marker, so the partition's LSO is
    pinned at `first_offset` until an admin abort (`clear()`).
    Needs brokers with transaction.partition.verification.enable=false.
    """

    bootstrap: str
    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    leader: int
    coordinator: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def _clear(self) -> None:
        admin = admin_client(self.bootstrap)
        try:
            state = admin.describe_producers([self.topic_partition])[self.topic_partition]
            ours = [p for p in state.active_producers if p.producer_id == self.producer_id]
            if not ours or ours[0].current_transaction_start_offset < 0:
                return  # already aborted, e.g. with `kafka-transactions abort`
            coordinator_epoch = ours[0].coordinator_epoch
            admin.abort_transaction(AbortTransactionSpec(self.topic_partition, self.producer_id,
                                                         self.producer_epoch, coordinator_epoch))
        finally:
            admin.close()


def inject_hanging_transaction(bootstrap: str, topic: str, partition: int = 0, *,
                               transactional_id: str | None = None, records: int = 1,
                               transaction_timeout_ms: int = 10_000) -> HangingTxn:
    transactional_id = transactional_id or unique_transactional_id("txnwatch-lab-hanging")
    admin = admin_client(bootstrap)
    try:
        coordinator = _retry(lambda: find_transaction_coordinator(admin, transactional_id))

        def init() -> Any:
            response = send(admin, InitProducerIdRequest(
                transactional_id=transactional_id, transaction_timeout_ms=transaction_timeout_ms,
                producer_id=-1, producer_epoch=-1, max_version=4), node_id=coordinator)
            error = Errors.for_code(response.error_code)
            if error is not Errors.NoError:
                raise error(f"InitProducerId({transactional_id})")
            return response

        init_response = _retry(init)
        pid, epoch = int(init_response.producer_id), int(init_response.producer_epoch)

        leader = partition_leaders(admin, topic)[partition]
        if leader < 0:
            raise LabError(f"{topic}-{partition} has no leader")
        # Produce v3..v9: the pre-KIP-890-part-2 path, where the leader does not add the partition to
        # the transaction itself (v12+ with transaction.version 2 would).
        result = transactional_produce(admin, leader, transactional_id, topic, partition, pid, epoch,
                                       [f"hanging-{i}".encode() for i in range(records)], key=b"hanging",
                                       versions=(3, 9), timeout_ms=10_000)
        error = Errors.for_code(result.error_code)
        if error is not Errors.NoError:
            raise LabError(f"raw transactional Produce to {topic}-{partition} was rejected with {error.__name__}; "
                           "hanging transactions need transaction.partition.verification.enable=false")
        return HangingTxn(bootstrap=bootstrap, transactional_id=transactional_id, topic=topic,
                          partition=partition, producer_id=pid, producer_epoch=epoch,
                          first_offset=int(result.base_offset), leader=leader, coordinator=coordinator)
    finally:
        admin.close()


def transactional_produce(admin: Any, leader: int, transactional_id: str, topic: str, partition: int,
                          producer_id: int, producer_epoch: int, values: list[bytes], *, key: bytes,
                          versions: tuple[int, int], timeout_ms: int) -> Any:
    """One raw transactional batch (sequence 0) to `leader` with a Produce version in `versions`; the
    partition's answer.  Which version decides who adds the partition to the transaction: v3-v9 nobody (the
    pre-KIP-890 hanging transaction), v12 the leader itself under transaction version 2 (v13 names topics
    by id)."""
    batch = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=producer_id,
                                      producer_epoch=producer_epoch, base_sequence=0, batch_size=1 << 20)
    for i, value in enumerate(values):
        batch.append(i, timestamp=None, key=key, value=value, headers=[])
    Topic = ProduceRequest.TopicProduceData
    Partition = Topic.PartitionProduceData
    request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=timeout_ms,
                             topic_data=[Topic(name=topic, partition_data=[
                                 Partition(index=partition, records=bytes(batch.build()))])],
                             min_version=versions[0], max_version=versions[1])
    return send(admin, request, node_id=leader).responses[0].partition_responses[0]


# -- LSO stall ------------------------------------------------------------------------------------


@dataclass
class LsoStallFault(Fault):
    """A real producer opened a transaction and went silent: the LSO stays at `first_offset` until the
    coordinator times it out (`transaction_timeout_ms`) or `clear()` aborts it."""

    # Out of the repr: the demo logs the fault, and a client object's repr names a memory address, not the fault.
    producer: KafkaProducer = field(repr=False)
    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    transaction_timeout_ms: int

    def _clear(self) -> None:
        try:
            self.producer.abort_transaction()
        except Errors.KafkaError:
            pass  # already aborted by the coordinator's timeout; the producer is fenced
        finally:
            self.producer.close(timeout=5)


def start_lso_stall(bootstrap: str, topic: str, partition: int = 0, *, transaction_timeout_ms: int = 15_000,
                    transactional_id: str | None = None, records: int = 3) -> LsoStallFault:
    transactional_id = transactional_id or unique_transactional_id("txnwatch-lab-stall")
    producer = transactional_producer(bootstrap, transactional_id, transaction_timeout_ms)
    producer.begin_transaction()
    futures = [producer.send(topic, key=b"stall", value=f"stall-{i}".encode(), partition=partition)
               for i in range(records)]
    producer.flush()
    first = futures[0].get(timeout=30)
    pid, epoch = _producer_id_and_epoch(producer)
    return LsoStallFault(producer=producer, transactional_id=transactional_id, topic=topic, partition=partition,
                    producer_id=pid, producer_epoch=epoch, first_offset=first.offset,
                    transaction_timeout_ms=transaction_timeout_ms)


# -- a crash-looping Flink sink ---------------------------------------------------------------------


@dataclass
class LingeringSinkFault(Fault):
    """A Flink KafkaSink subtask that keeps leaving a checkpoint's transaction open (``<prefix>-<subtask>-<n>``,
    odd n) and commits the next one (n + 1, begun after it), as a job restarting from a checkpoint whose transactions
    it no longer knows does: a lingering, superseded transaction is open at every moment, although the coordinator
    aborts each at its ``transaction_timeout_ms`` (a new one is left every ``period_s``, under that timeout).

    A test that needs one specific open transaction for longer than the lab's transaction.max.timeout.ms cannot
    have it; one that needs *a* lingering transaction while it checks something slow (the dashboards' panels) can."""

    prefix: str
    subtask: int
    thread: threading.Thread = field(repr=False)
    stop: threading.Event = field(repr=False)
    left: list[KafkaProducer] = field(default_factory=list, repr=False)
    #: The checkpoints left open so far, oldest first (each one's transactional id ends with it).
    checkpoints: list[int] = field(default_factory=list)

    def _clear(self) -> None:
        self.stop.set()
        self.thread.join(60)
        for producer in self.left:
            try:
                producer.abort_transaction()
            except Errors.KafkaError:
                pass  # aborted by the coordinator's timeout: the producer is fenced
            finally:
                producer.close(timeout=5)


def start_lingering_sink(bootstrap: str, topic: str, partition: int = 0, *, prefix: str, subtask: int = 0,
                         transaction_timeout_ms: int = 15_000, period_s: float | None = None) -> LingeringSinkFault:
    """Starts the loop and returns once the first superseded transaction is open and its successor committed."""
    period = period_s if period_s is not None else transaction_timeout_ms / 1000 / 3
    stop, ready, failed = threading.Event(), threading.Event(), []
    fault = LingeringSinkFault(prefix=prefix, subtask=subtask, thread=threading.Thread(), stop=stop)

    def checkpoint(n: int, commit: bool) -> KafkaProducer:
        producer = transactional_producer(bootstrap, f"{prefix}-{subtask}-{n}", transaction_timeout_ms)
        producer.begin_transaction()
        producer.send(topic, key=b"sink", value=f"checkpoint-{n}".encode(), partition=partition)
        producer.flush()
        if commit:
            producer.commit_transaction()
            producer.close(timeout=5)
        return producer

    def loop() -> None:
        n = 1
        while not stop.is_set():
            try:
                fault.left.append(checkpoint(n, commit=False))
                fault.checkpoints.append(n)
                time.sleep(0.2)  # the successor begins strictly later: the start times decide
                checkpoint(n + 1, commit=True)
                ready.set()
            except Exception as exc:  # a loaded lab: try again next period, say why if the first never came
                failed.append(exc)
            # Producers older than the timeout are fenced by now: close them, keep the list short.
            while len(fault.left) > 1 + int(transaction_timeout_ms / 1000 / period):
                old = fault.left.pop(0)
                old.close(timeout=5)
            n += 2
            stop.wait(period)

    fault.thread = threading.Thread(target=loop, name=f"lingering-{prefix}", daemon=True)
    fault.thread.start()
    if not ready.wait(60):
        fault.clear()
        raise LabError(f"the lingering sink {prefix} could not leave a checkpoint open: {failed[-1:] or 'timeout'}")
    return fault


# -- coordinator-timeout abort ----------------------------------------------------------------------


@dataclass
class CoordinatorTimeoutAbort(Fault):
    """The coordinator aborted a transaction that outlived its transaction.timeout.ms and bumped the
    epoch; the late producer's next transactional call fails (KIP-588)."""

    bootstrap: str
    producer: KafkaProducer
    transactional_id: str
    topic: str
    partition: int
    producer_id: int
    epoch_before: int
    epoch_after: int | None = None
    final_state: str | None = None

    def wait_for_abort(self, timeout: float = 30.0) -> None:
        """Block until DescribeTransactions shows the bumped epoch and a completed abort."""
        admin = admin_client(self.bootstrap)
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                try:
                    desc = admin.describe_transactions([self.transactional_id])[self.transactional_id]
                except COORDINATOR_MOVING:  # an earlier failover's leadership still settling: ask again
                    time.sleep(0.5)
                    continue
                if desc.producer_epoch > self.epoch_before and desc.state.value == TxnState.COMPLETE_ABORT:
                    self.epoch_after, self.final_state = desc.producer_epoch, desc.state.value
                    return
                time.sleep(0.2)
        finally:
            admin.close()
        raise LabError(f"coordinator did not time out {self.transactional_id} within {timeout}s")

    def late_commit(self) -> BaseException | None:
        """What the late producer sees when it finally commits; None would mean Kafka accepted it."""
        try:
            self.producer.commit_transaction()
        except BaseException as exc:  # the point is to capture whatever Kafka answers
            return exc
        return None

    def _clear(self) -> None:
        self.producer.close(timeout=5)


def coordinator_timeout_abort(bootstrap: str, topic: str, partition: int = 0, *,
                              transaction_timeout_ms: int = 2_000, wait: bool = True,
                              transactional_id: str | None = None) -> CoordinatorTimeoutAbort:
    transactional_id = transactional_id or unique_transactional_id("txnwatch-lab-timeout")
    producer = transactional_producer(bootstrap, transactional_id, transaction_timeout_ms)
    producer.begin_transaction()
    producer.send(topic, key=b"late", value=b"late", partition=partition).get(timeout=30)
    pid, epoch = _producer_id_and_epoch(producer)
    fault = CoordinatorTimeoutAbort(bootstrap=bootstrap, producer=producer, transactional_id=transactional_id,
                                    topic=topic, partition=partition, producer_id=pid, epoch_before=epoch)
    if wait:
        fault.wait_for_abort(timeout=transaction_timeout_ms / 1000 + 30)
    return fault


# -- fencing -----------------------------------------------------------------------------------------


@dataclass
class Fencing(Fault):
    """Two producers with one transactional.id: the second InitProducerId bumps the epoch, aborts the
    first's open transaction and fences it (a zombie instance)."""

    transactional_id: str
    zombie: KafkaProducer
    successor: KafkaProducer
    producer_id: int
    zombie_epoch: int
    successor_epoch: int

    def zombie_commit(self) -> BaseException | None:
        try:
            self.zombie.commit_transaction()
        except BaseException as exc:
            return exc
        return None

    def _clear(self) -> None:
        for producer in (self.zombie, self.successor):
            producer.close(timeout=5)


def fence_producer(bootstrap: str, topic: str, partition: int = 0, *, transaction_timeout_ms: int = 10_000,
                   transactional_id: str | None = None) -> Fencing:
    transactional_id = transactional_id or unique_transactional_id("txnwatch-lab-fenced")
    zombie = transactional_producer(bootstrap, transactional_id, transaction_timeout_ms)
    zombie.begin_transaction()
    zombie.send(topic, key=b"zombie", value=b"zombie", partition=partition).get(timeout=30)
    _, zombie_epoch = _producer_id_and_epoch(zombie)
    successor = transactional_producer(bootstrap, transactional_id, transaction_timeout_ms)
    succ_pid, succ_epoch = _producer_id_and_epoch(successor)
    return Fencing(transactional_id=transactional_id, zombie=zombie, successor=successor, producer_id=succ_pid,
                   zombie_epoch=zombie_epoch, successor_epoch=succ_epoch)


# -- stuck PrepareCommit / PrepareAbort --------------------------------------------------------------


@dataclass
class StuckPrepareFault(Fault):
    """The leader of a partition in the transaction is frozen (or stopped) while the producer commits
    (or aborts): the coordinator persists PrepareCommit/PrepareAbort but cannot write the marker, so the
    transaction stays in Prepare* until the broker comes back (`clear()`)."""

    lab: LabCluster
    producer: KafkaProducer
    transactional_id: str
    topic: str
    partition: int
    leader: int
    coordinator: int
    mode: str
    commit: bool
    end_thread: threading.Thread
    end_error: list[BaseException] = field(default_factory=list)

    def _clear(self) -> None:
        if self.mode == "freeze":
            self.lab.thaw_broker(self.leader)
        else:
            self.lab.start_broker(self.leader)
        self.end_thread.join(timeout=60)
        self.producer.close(timeout=5)


def _transactional_id_not_on(lab: LabCluster, avoid: int, prefix: str) -> tuple[str, int]:
    """A transactional id whose coordinator is not `avoid`: freezing the partition leader must not also
    freeze the coordinator, or we would see a coordinator outage instead of a stuck marker."""
    for _ in range(200):
        candidate = unique_transactional_id(prefix)
        coordinator = _retry(lambda: lab.transaction_coordinator(candidate))  # noqa: B023  # called at once, in this iteration
        if coordinator != avoid:
            return candidate, coordinator
    raise LabError(f"every transactional id maps to broker {avoid}; the lab needs at least 2 brokers")


def stuck_prepare(lab: LabCluster, topic: str, partition: int = 0, *, mode: str = "freeze",
                  commit: bool = True, transaction_timeout_ms: int | None = None) -> StuckPrepareFault:
    """`mode`: "freeze" (SIGSTOP) or "stop" (SIGKILL) the partition leader right before EndTxn.

    Use a replication-factor-1 topic: with other replicas in the ISR, the controller would move
    leadership once the frozen broker's session expires and the marker would land after all."""
    if mode not in ("freeze", "stop"):
        raise ValueError("mode must be 'freeze' or 'stop'")
    leader = lab.leader_of(topic, partition)
    transactional_id, coordinator = _transactional_id_not_on(lab, leader, "txnwatch-lab-prepare")
    producer = transactional_producer(lab.bootstrap_servers, transactional_id,
                                      transaction_timeout_ms or lab.transaction_max_timeout_ms)
    producer.begin_transaction()
    producer.send(topic, key=b"prepare", value=b"prepare", partition=partition).get(timeout=30)
    if mode == "freeze":
        lab.freeze_broker(leader)
    else:
        lab.stop_broker(leader, kill=True)
    errors: list[BaseException] = []

    def end() -> None:
        try:
            producer.commit_transaction() if commit else producer.abort_transaction()
        except BaseException as exc:  # reported through the handle
            errors.append(exc)

    thread = threading.Thread(target=end, name=f"stuck-prepare-{transactional_id}", daemon=True)
    thread.start()
    return StuckPrepareFault(lab=lab, producer=producer, transactional_id=transactional_id, topic=topic,
                        partition=partition, leader=leader, coordinator=coordinator, mode=mode, commit=commit,
                        end_thread=thread, end_error=errors)


# -- broker loss, coordinator failover, freezing -----------------------------------------------------


@dataclass
class BrokerDown(Fault):
    lab: LabCluster
    node_id: int
    killed: bool

    def _clear(self) -> None:
        self.lab.start_broker(self.node_id)


def kill_broker(lab: LabCluster, node_id: int, *, hard: bool = True) -> BrokerDown:
    """`hard`: SIGKILL, a crash; otherwise SIGTERM, a controlled shutdown. `clear()` restarts it."""
    lab.stop_broker(node_id, kill=hard)
    return BrokerDown(lab=lab, node_id=node_id, killed=hard)


@dataclass
class CoordinatorFailover(Fault):
    lab: LabCluster
    transactional_id: str
    old_coordinator: int
    down: BrokerDown

    def new_coordinator(self, timeout: float = 30.0) -> int:
        """Wait until another broker has loaded the transactional id's __transaction_state partition."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                node = self.lab.transaction_coordinator(self.transactional_id)
                if node != self.old_coordinator:
                    return node
            except Errors.KafkaError:
                pass
            if time.monotonic() > deadline:
                raise LabError(f"no new coordinator for {self.transactional_id} within {timeout}s")
            time.sleep(0.3)

    def _clear(self) -> None:
        self.down.clear()


def fail_over_coordinator(lab: LabCluster, transactional_id: str, *, hard: bool = False) -> CoordinatorFailover:
    """Stop the broker leading the transactional id's __transaction_state partition."""
    old = lab.transaction_coordinator(transactional_id)
    return CoordinatorFailover(lab=lab, transactional_id=transactional_id, old_coordinator=old,
                               down=kill_broker(lab, old, hard=hard))


@dataclass
class FrozenBroker(Fault):
    lab: LabCluster
    node_id: int

    def _clear(self) -> None:
        self.lab.thaw_broker(self.node_id)


def freeze_broker(lab: LabCluster, node_id: int) -> FrozenBroker:
    lab.freeze_broker(node_id)
    return FrozenBroker(lab=lab, node_id=node_id)


# -- network (through the lab's TCP proxy) ----------------------------------------------------------


def _proxy(lab: LabCluster) -> Any:
    proxy = lab.proxy
    if proxy is None:
        raise LabError("this lab runs without the TCP proxy (started with proxy=False)")
    return proxy


@dataclass
class Latency(Fault):
    lab: LabCluster
    node_id: int | None
    delay_ms: float

    def _clear(self) -> None:
        _proxy(self.lab).delay(self.node_id, 0)


def add_latency(lab: LabCluster, node_id: int | None, delay_ms: float) -> Latency:
    """One-way delay on every chunk between clients and broker `node_id` (None: every broker)."""
    _proxy(lab).delay(node_id, delay_ms)
    return Latency(lab=lab, node_id=node_id, delay_ms=delay_ms)


@dataclass
class ConnectionCut(Fault):
    lab: LabCluster
    node_id: int | None
    blocked: bool
    connections_cut: int

    def _clear(self) -> None:
        _proxy(self.lab).cut(self.node_id, block=False)


def cut_connections(lab: LabCluster, node_id: int | None, *, block: bool = False) -> ConnectionCut:
    """Abort clients' open connections to the broker; with `block`, refuse new ones until clear()."""
    reply = _proxy(lab).cut(node_id, block=block)
    return ConnectionCut(lab=lab, node_id=node_id, blocked=block, connections_cut=int(reply.get("cut", 0)))
