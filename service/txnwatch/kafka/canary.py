"""The transactional canary's Kafka side: its topic, its transactional producer, its read_committed reader.

A narrow interface (:class:`CanaryClient`) over kafka-python, every failure returned as a
:class:`~txnwatch.core.canary.StepError` with its KIP-1050 class, never raised:

* the topic (``ensure_topic``): created with one partition led by each broker, as KMinion's end-to-end topic
  management does (partition *i* has broker *i* as its preferred leader); a broker that leads none of its
  partitions later (one added to the cluster) gets a partition added for it;
* the coordinator (``locate``): FindCoordinator for the transactional id, sent anew each round (kafka-python's
  admin caches coordinators), and the metadata of the id's ``__transaction_state`` partition, so a round that
  finds no coordinator still knows which partition has no leader and which brokers hold it;
* one transaction (``commit``): begin, one record to the partition, commit.  kafka-python's
  ``commit_transaction`` waits without a bound, so the commit's result is waited for here with the canary's
  timeout (``TransactionManager.begin_commit`` and the sender's ``wakeup``: kafka-python internals,
  pinned by tests/kafka/test_canary_client.py).  After any failure the producer is closed and the next round
  makes a new one: its InitProducerId with the same id fences whatever the old one left open;
* the reader (``read``): a group-less consumer, ``isolation_level=read_committed``, assigned every partition and
  starting at their ends, handed only records whose commit marker is written (the LSO passed them).
"""

from __future__ import annotations

import logging
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import errors as Errors
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.structs import TopicPartition as KafkaTopicPartition

from txnwatch.core.canary import (
    CanaryStage,
    CoordinatorLocation,
    StepError,
    transaction_state_partition,
)
from txnwatch.core.model import TRANSACTION_STATE_TOPIC
from txnwatch.kafka import errors
from txnwatch.kafka.error_classes import classify
from txnwatch.kafka.settings import ClusterConnectionSettings

log = logging.getLogger(__name__)

_TRANSACTION_KEY = 1  # FindCoordinator key type: TRANSACTION
#: A client-side wait that ran out is what a broker's REQUEST_TIMED_OUT is to KIP-1050: retriable.
TIMED_OUT = "REQUEST_TIMED_OUT"


def step_error(stage: CanaryStage, exc: BaseException) -> StepError:
    """A kafka-python exception as data: a broker error keeps Kafka's name, a client-side timeout is
    REQUEST_TIMED_OUT, anything else is named by its type (class unknown)."""
    if isinstance(exc, Errors.BrokerResponseError) and isinstance(getattr(exc, "message", None), str):
        name = str(exc.message)
    elif isinstance(exc, Errors.KafkaTimeoutError):
        name = TIMED_OUT
    else:
        name = type(exc).__name__
    klass, _ = classify(name)
    return StepError(stage, name, klass, str(exc)[:500])


def _code_error(stage: CanaryStage, code: int, message: str | None) -> StepError:
    error = errors.from_code(stage.value, "", code, message)
    return StepError(stage, error.name or "", error.error_class, error.message[:500])


def _leader(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and value >= 0 else None


class CanaryClient:
    """One cluster's canary connections.  Not thread-safe: it belongs to the canary's thread."""

    def __init__(self, settings: ClusterConnectionSettings, *, topic: str, transactional_id: str,
                 replication_factor: int, transaction_timeout_ms: int, timeout_ms: int) -> None:
        config = settings.client_config()
        self._security = {k: v for k, v in config.items() if k.startswith(("security_", "sasl_", "ssl_"))}
        self._bootstrap = config["bootstrap_servers"]
        self._client_id = f"{settings.client_id}-canary"
        self.topic = topic
        self.transactional_id = transactional_id
        self._replication = replication_factor
        self._transaction_timeout_ms = transaction_timeout_ms
        self._timeout_ms = timeout_ms
        self._admin = KafkaAdminClient(bootstrap_servers=self._bootstrap, client_id=self._client_id,
                                       request_timeout_ms=timeout_ms,
                                       bootstrap_timeout_ms=settings.connect_timeout_ms, **self._security)
        self._producer: KafkaProducer | None = None
        self._reader: KafkaConsumer | None = None
        self._assigned: tuple[int, ...] = ()

    # -- the topic -------------------------------------------------------------------------------------

    def ensure_topic(self) -> tuple[dict[int, int | None], StepError | None]:
        """partition → leader (None: no leader) of the canary's topic, made or extended so every broker
        leads a partition."""
        try:
            brokers = self._brokers()
            leaders = self._leaders(self.topic)
            if leaders is None:
                self._create(brokers)
                leaders = self._leaders(self.topic) or {}
            else:
                self._add_missing(brokers, leaders)
                leaders = self._leaders(self.topic) or {}
        except Exception as exc:
            return {}, step_error(CanaryStage.TOPIC, exc)
        return leaders, None

    def _brokers(self) -> list[int]:
        """The brokers in service (DescribeCluster lists fenced ones too: a dead broker is no leader to give a
        partition; the Metadata fallback of older brokers names them ``node_id``)."""
        found = self._admin.describe_cluster()["brokers"]
        return sorted(int(b.get("broker_id", b.get("node_id"))) for b in found if not b.get("is_fenced"))

    def _leaders(self, topic: str) -> dict[int, int | None] | None:
        described = self._admin.describe_topics([topic])
        if not described:
            return None
        entry = described[0]
        code = int(entry.get("error_code", 0) or 0)
        if code == Errors.UnknownTopicOrPartitionError.errno:
            return None
        if code:
            raise Errors.for_code(code)(f"Metadata of {topic}")
        return {int(p["partition_index"]): _leader(p.get("leader_id")) for p in entry["partitions"]}

    def _assignment(self, lead: int, brokers: list[int], factor: int | None = None) -> list[int]:
        """The preferred leader first, then the next brokers in id order (capped at the cluster's size)."""
        i = brokers.index(lead)
        count = max(1, min(factor or self._replication, len(brokers)))
        return [brokers[(i + k) % len(brokers)] for k in range(count)]

    def _create(self, brokers: list[int]) -> None:
        assignments = {p: self._assignment(b, brokers) for p, b in enumerate(brokers)}
        try:
            self._admin.create_topics({self.topic: {"assignments": assignments}}, timeout_ms=self._timeout_ms,
                                      wait_for_metadata=True)
            log.info("canary: created topic %s with %d partitions, one led by each broker", self.topic, len(brokers))
        except Errors.TopicAlreadyExistsError:
            pass  # another replica made it meanwhile

    def _add_missing(self, brokers: list[int], leaders: dict[int, int | None]) -> None:
        """KMinion's rule: every broker leads a partition.  Missing ones get a new partition each (partitions are
        never removed, and a leader elected elsewhere goes back to its preferred broker by itself)."""
        replicas = self._replicas()
        preferred = {nodes[0] for nodes in replicas if nodes}
        missing = [b for b in brokers if b not in preferred]
        if not missing:
            return
        # New partitions keep the topic's replication factor (Kafka refuses a manual assignment that differs).
        factor = max((len(nodes) for nodes in replicas), default=self._replication)
        self._admin.create_partitions(
            {self.topic: {"count": len(leaders) + len(missing),
                          "assignments": [self._assignment(b, brokers, factor) for b in missing]}},
            timeout_ms=self._timeout_ms)
        log.info("canary: added %d partition(s) to %s for broker(s) %s", len(missing), self.topic, missing)

    def _replicas(self) -> list[list[int]]:
        described = self._admin.describe_topics([self.topic])
        return [[int(r) for r in p.get("replica_nodes") or ()] for p in described[0]["partitions"]]

    # -- the coordinator -------------------------------------------------------------------------------

    def locate(self) -> CoordinatorLocation:
        """FindCoordinator (never the admin's cache) and the id's ``__transaction_state`` partition."""
        partition: int | None = None
        leader: int | None = None
        replicas: tuple[int, ...] = ()
        try:
            described = self._admin.describe_topics([TRANSACTION_STATE_TOPIC])
            parts = described[0]["partitions"] if described else []
            if parts:
                partition = transaction_state_partition(self.transactional_id, len(parts))
                entry = next(p for p in parts if int(p["partition_index"]) == partition)
                leader = _leader(entry.get("leader_id"))
                replicas = tuple(int(r) for r in entry.get("replica_nodes") or ())
        except Exception as exc:
            log.debug("canary: metadata of %s: %s", TRANSACTION_STATE_TOPIC, exc)
        manager = self._admin._manager  # kafka-python's connection manager: the admin API is built on it

        async def find() -> Any:
            return await manager.send(FindCoordinatorRequest(key_type=_TRANSACTION_KEY,
                                                             coordinator_keys=[self.transactional_id], min_version=4))

        try:
            answer = manager.run(find)
            found = answer.coordinators[0]
        except Exception as exc:
            return CoordinatorLocation(None, partition, leader, replicas, step_error(CanaryStage.COORDINATOR, exc))
        if found.error_code:
            return CoordinatorLocation(None, partition, leader, replicas,
                                       _code_error(CanaryStage.COORDINATOR, found.error_code, found.error_message))
        return CoordinatorLocation(int(found.node_id), partition, leader, replicas)

    # -- one transaction -------------------------------------------------------------------------------

    def _producer_ready(self) -> KafkaProducer:
        if self._producer is None:
            producer = KafkaProducer(
                bootstrap_servers=self._bootstrap, client_id=self._client_id, transactional_id=self.transactional_id,
                transaction_timeout_ms=self._transaction_timeout_ms, linger_ms=0, acks="all",
                request_timeout_ms=self._timeout_ms, delivery_timeout_ms=self._timeout_ms + 1_000,
                max_block_ms=self._timeout_ms, retry_backoff_ms=100, metrics_enabled=False, **self._security)
            try:
                producer.init_transactions()  # fences the id's previous producer (a restart, another replica)
            except BaseException:
                producer.close(timeout=0)
                raise
            self._producer = producer
        return self._producer

    def commit(self, partition: int, payload: bytes) -> StepError | None:
        """One transaction of one record on ``partition``; None when its commit was acknowledged."""
        stage = CanaryStage.INIT
        try:
            producer = self._producer_ready()
            stage = CanaryStage.BEGIN
            producer.begin_transaction()
            stage = CanaryStage.PRODUCE
            producer.send(self.topic, value=payload, partition=partition).get(timeout=self._timeout_ms / 1000)
            stage = CanaryStage.COMMIT
            manager = producer._transaction_manager  # commit_transaction() waits without a bound
            result = manager.begin_commit()
            producer._sender.wakeup()
            if not result.wait(timeout_ms=self._timeout_ms):
                raise Errors.KafkaTimeoutError(f"commit not acknowledged within {self._timeout_ms} ms")
        except Exception as exc:
            error = step_error(stage, exc)
            self._drop_producer()
            return error
        return None

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.close(timeout=0)
            except Exception as exc:
                log.debug("canary: closing the producer: %s", exc)

    # -- the reader ------------------------------------------------------------------------------------

    def read(self, partitions: tuple[int, ...], max_wait_ms: int) -> list[tuple[int, bytes]]:
        """Records a read_committed reader is handed within ``max_wait_ms``: (partition, value)."""
        if self._reader is None or partitions != self._assigned:
            self._open_reader(partitions)
        assert self._reader is not None
        batches = self._reader.poll(timeout_ms=max_wait_ms)
        return [(tp.partition, record.value) for tp, records in batches.items() for record in records
                if isinstance(record.value, bytes)]

    def _open_reader(self, partitions: tuple[int, ...]) -> None:
        if self._reader is None:
            self._reader = KafkaConsumer(
                bootstrap_servers=self._bootstrap, client_id=f"{self._client_id}-reader", group_id=None,
                enable_auto_commit=False, isolation_level="read_committed", auto_offset_reset="latest",
                fetch_max_wait_ms=50, request_timeout_ms=max(self._timeout_ms, 1_000) + 1_000,
                metrics_enabled=False, **self._security)
        wanted = [KafkaTopicPartition(self.topic, p) for p in partitions]
        self._reader.assign(wanted)
        new = [tp for tp in wanted if tp.partition not in self._assigned]
        if new:
            self._reader.seek_to_end(*new)
            for tp in new:
                self._reader.position(tp)  # resolve the end now, before this round's commits
        self._assigned = partitions

    def close(self) -> None:
        self._drop_producer()
        for closing in (self._reader, self._admin):
            if closing is None:
                continue
            try:
                closing.close()
            except Exception as exc:
                log.debug("canary: closing: %s", exc)
        self._reader = None
