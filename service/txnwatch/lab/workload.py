"""Workload generator: real transactional producers (kafka-python, and Kafka's own Java producer) and consumers,
plus scheduled faults.

Every produced value carries the producer's intent (`C` for a transaction it
will commit, `A` for one it will abort), so a read_committed consumer can
prove it never saw aborted data and a read_uncommitted one shows that it does.
The consume-transform-produce stage commits its input offsets inside its
output transaction (send_offsets_to_transaction), the exactly-once pattern
Kafka Streams and Flink use.

Java producers (`java_producers`) are Kafka's ProducerPerformance with a
transactional id (see lab/java_clients.py): on Kafka 4 defaults they are
transaction version 2 clients, whose every commit bumps the epoch, beside the
kafka-python ones that speak the older protocol.  They write random payloads to
their own topic (`<prefix>-java`), so the consumers' aborted-data check stays
about the kafka-python records.
"""

from __future__ import annotations

import logging
import random
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import kafka.errors as Errors
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata

from txnwatch.lab import faults
from txnwatch.lab.errors import LabError
from txnwatch.lab.topics import create_topic
from txnwatch.lab.wire import admin_client

log = logging.getLogger(__name__)

#: Seconds a read-only consumer may stay without partitions before it leaves and joins again.
UNASSIGNED_RESTART_S = 20


@dataclass(frozen=True)
class Scenario:
    name: str
    producers: int = 2
    transactions_per_second: float = 2.0  # per producer
    records_per_transaction: int = 5
    abort_ratio: float = 0.1
    partitions: int = 3
    read_committed_groups: int = 1
    read_uncommitted_groups: int = 1
    consume_transform_produce: bool = True
    transaction_timeout_ms: int = 10_000
    #: Kafka's own Java transactional producers (ProducerPerformance), each committing
    #: `transactions_per_second` times a second; they need `lab` (for the Kafka version) or the default version.
    java_producers: int = 0
    #: Faults kept up for the whole run (demo): "hanging", "lso_stall".
    standing_faults: tuple[str, ...] = ()
    #: Seconds between random faults (chaos); 0 disables.
    chaos_interval_s: float = 0.0
    chaos_hold_s: float = 8.0


SCENARIOS: dict[str, Scenario] = {
    # What `make run` shows: healthy traffic, one hanging transaction, a recurring LSO stall.
    "demo": Scenario(name="demo", standing_faults=("hanging", "lso_stall"), java_producers=1),
    # What Kafka 4 users run: a Java transactional producer beside the kafka-python ones.
    "steady": Scenario(name="steady", java_producers=1),
    # Random faults every few seconds on top of steady traffic.
    "chaos": Scenario(name="chaos", producers=3, chaos_interval_s=10.0),
}


@dataclass
class WorkloadStats:
    transactions_committed: int = 0
    transactions_aborted: int = 0
    records_produced: int = 0
    producer_errors: int = 0
    consumed: dict[str, int] = field(default_factory=dict)
    #: Records a group saw from transactions their producer aborted (must stay 0 for read_committed).
    aborted_records_seen: dict[str, int] = field(default_factory=dict)
    ctp_transactions: int = 0
    ctp_errors: int = 0
    faults_injected: list[str] = field(default_factory=list)
    #: Java producers: transactional id -> exit code (None while running), filled in by stop().
    java_producers: dict[str, int | None] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class Workload:
    """Start with `start()`, stop with `stop()`; or `run(duration)` in the foreground.

    `lab` (a LabCluster) enables faults that need process control (broker restarts,
    latency); without it chaos sticks to client-side faults.
    """

    def __init__(self, bootstrap: str, scenario: Scenario | str = "steady", *, topic_prefix: str | None = None,
                 lab: Any = None, seed: int | None = None, transaction_max_timeout_ms: int | None = None) -> None:
        self.bootstrap = bootstrap
        self.scenario = SCENARIOS[scenario] if isinstance(scenario, str) else scenario
        max_timeout = transaction_max_timeout_ms or getattr(lab, "transaction_max_timeout_ms", None)
        if max_timeout and self.scenario.transaction_timeout_ms > max_timeout:
            self.scenario = replace(self.scenario, transaction_timeout_ms=max_timeout)
        self.max_timeout_ms = max_timeout or self.scenario.transaction_timeout_ms
        self.prefix = topic_prefix or f"txnwatch-{self.scenario.name}"
        self.input_topic = f"{self.prefix}-input"
        self.output_topic = f"{self.prefix}-output"
        self.java_topic = f"{self.prefix}-java"
        self.lab = lab
        self.stats = WorkloadStats()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._active_faults: list[faults.Fault] = []
        self._random = random.Random(seed)
        self._java: list[Any] = []

    # -- lifecycle -----------------------------------------------------------------------------------

    def start(self) -> Workload:
        self._ensure_topics()
        s = self.scenario
        for i in range(s.producers):
            self._spawn(f"producer-{i}", partial(self._producer_loop, i))
        for i in range(s.read_committed_groups):
            self._spawn(f"rc-{i}", partial(self._consumer_loop, f"{self.prefix}-read-committed-{i}", "read_committed"))
        for i in range(s.read_uncommitted_groups):
            self._spawn(f"ru-{i}", partial(self._consumer_loop, f"{self.prefix}-read-uncommitted-{i}",
                                           "read_uncommitted"))
        if s.consume_transform_produce:
            self._spawn("ctp", self._ctp_loop)
        if s.standing_faults:
            self._spawn("standing-faults", self._standing_faults_loop)
        if s.chaos_interval_s:
            self._spawn("chaos", self._chaos_loop)
        for i in range(s.java_producers):
            self._start_java_producer(i)
        return self

    def stop(self, timeout: float = 30.0) -> WorkloadStats:
        self._stop.set()
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.1, deadline - time.monotonic()))
        for fault in list(self._active_faults):
            self._clear_fault(fault)
        for producer in self._java:
            producer.stop()
            self.stats.java_producers[producer.spec.transactional_id] = producer.returncode
        return self.stats

    def run(self, duration: float | None = None, report_every: float = 10.0,
            report: Callable[[WorkloadStats], None] | None = None) -> WorkloadStats:
        """Foreground: run until `duration` elapses or Ctrl-C, reporting progress periodically."""
        self.start()
        started = time.monotonic()
        try:
            while duration is None or time.monotonic() - started < duration:
                remaining = report_every if duration is None else duration - (time.monotonic() - started)
                time.sleep(max(0.0, min(report_every, remaining)))
                if report:
                    report(self.stats)
        except KeyboardInterrupt:
            pass
        return self.stop()

    def __enter__(self) -> Workload:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        def guarded() -> None:
            try:
                target()
            except Exception:  # a dying worker must be visible, not silent
                log.exception("workload thread %s died", name)

        thread = threading.Thread(target=guarded, name=f"workload-{name}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def _start_java_producer(self, index: int) -> None:
        from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION
        from txnwatch.lab.java_clients import JavaProducerSpec, start_java_producer

        s = self.scenario
        spec = JavaProducerSpec(transactional_id=f"{self.prefix}-java-{index}", topic=self.java_topic,
                                transaction_duration_ms=max(1, round(1000 / s.transactions_per_second)),
                                records_per_second=max(1, round(s.records_per_transaction * s.transactions_per_second)),
                                duration_s=None, transaction_timeout_ms=s.transaction_timeout_ms)
        lab_dir = getattr(self.lab, "lab_dir", None)
        log_dir = Path(lab_dir) if lab_dir else Path(tempfile.mkdtemp(prefix="txnwatch-java-"))
        producer = start_java_producer(self.bootstrap, spec, log_dir,
                                       kafka_version=getattr(self.lab, "kafka_version", DEFAULT_KAFKA_VERSION))
        self._java.append(producer)
        self.stats.java_producers[spec.transactional_id] = None
        log.info("Java producer %s started (pid %d, log %s)", spec.transactional_id, producer.pid, producer.log_file)

    def _ensure_topics(self) -> None:
        admin = admin_client(self.bootstrap)
        try:
            existing = set(admin.list_topics())
            replication = min(3, len(admin.describe_cluster()["brokers"]))
            topics = [self.input_topic, self.output_topic] + ([self.java_topic] if self.scenario.java_producers else [])
            for topic in topics:
                if topic not in existing:
                    try:
                        create_topic(admin, topic, self.scenario.partitions, replication)
                    except Errors.TopicAlreadyExistsError:
                        pass
        finally:
            admin.close()

    def _count(self, **deltas: int) -> None:
        with self._lock:
            for key, delta in deltas.items():
                setattr(self.stats, key, getattr(self.stats, key) + delta)

    # -- producers -------------------------------------------------------------------------------------

    def _producer_loop(self, index: int) -> None:
        s = self.scenario
        txn_id = f"{self.prefix}-producer-{index}"
        producer = None
        interval = 1.0 / s.transactions_per_second
        while not self._stop.is_set():
            try:
                if producer is None:
                    producer = faults.transactional_producer(self.bootstrap, txn_id, s.transaction_timeout_ms)
                will_abort = self._random.random() < s.abort_ratio
                flag = b"A" if will_abort else b"C"
                producer.begin_transaction()
                for n in range(s.records_per_transaction):
                    producer.send(self.input_topic, key=f"{index}-{n}".encode(), value=flag + f"{time.time()}".encode())
                if will_abort:
                    producer.flush()  # let the doomed records reach the log, as real aborted work does
                    producer.abort_transaction()
                    self._count(transactions_aborted=1, records_produced=s.records_per_transaction)
                else:
                    producer.commit_transaction()
                    self._count(transactions_committed=1, records_produced=s.records_per_transaction)
            except Errors.KafkaError as exc:
                # Fenced, timed out by the coordinator, or a broker went away: start over, as an app would.
                log.info("producer %s: %r; recreating", txn_id, exc)
                self._count(producer_errors=1)
                if producer is not None:
                    producer.close(timeout=2)
                producer = None
                self._stop.wait(1.0)
                continue
            self._stop.wait(interval)
        if producer is not None:
            producer.close(timeout=5)

    # -- consumers -------------------------------------------------------------------------------------

    def _consumer(self, group: str, isolation: str, **extra: Any) -> KafkaConsumer:
        # Metadata every 5 s, not kafka-python's 5 minutes: the topics were created a moment ago and a broker other
        # than the admin's may not list them yet; a join made on such metadata assigns nothing ("No partition
        # metadata") and only a later refresh sends the consumer back to join.
        return KafkaConsumer(bootstrap_servers=self.bootstrap, group_id=group, isolation_level=isolation,
                             auto_offset_reset="earliest", client_id=group, metadata_max_age_ms=5_000, **extra)

    def _consumer_loop(self, group: str, isolation: str) -> None:
        consumer = self._subscribed(group, isolation)
        joined_by = time.monotonic() + UNASSIGNED_RESTART_S
        try:
            while not self._stop.is_set():
                if not consumer.assignment() and time.monotonic() > joined_by:
                    # A join that assigned nothing (the topics were new to its leader's metadata) and never healed:
                    # start over as an application's restart would, rather than read nothing for the whole run.
                    log.info("consumer %s: no partitions after %d s; rejoining", group, UNASSIGNED_RESTART_S)
                    consumer.close()
                    consumer = self._subscribed(group, isolation)
                    joined_by = time.monotonic() + UNASSIGNED_RESTART_S
                batches = consumer.poll(timeout_ms=500)
                seen = aborted = 0
                for records in batches.values():
                    for record in records:
                        seen += 1
                        if record.topic == self.input_topic and record.value and record.value[:1] == b"A":
                            aborted += 1
                with self._lock:
                    self.stats.consumed[group] = self.stats.consumed.get(group, 0) + seen
                    self.stats.aborted_records_seen[group] = self.stats.aborted_records_seen.get(group, 0) + aborted
        finally:
            consumer.close()

    def _subscribed(self, group: str, isolation: str) -> KafkaConsumer:
        consumer = self._consumer(group, isolation)
        consumer.subscribe([self.input_topic, self.output_topic])
        return consumer

    def _ctp_loop(self) -> None:
        """read_committed input -> transform -> output, offsets committed inside the output transaction."""
        group = f"{self.prefix}-ctp"
        txn_id = f"{self.prefix}-ctp"
        consumer = producer = None
        while not self._stop.is_set():
            try:
                if consumer is None:
                    consumer = self._consumer(group, "read_committed", enable_auto_commit=False)
                    consumer.subscribe([self.input_topic])
                if producer is None:
                    producer = faults.transactional_producer(self.bootstrap, txn_id, self.scenario.transaction_timeout_ms)
                batches = consumer.poll(timeout_ms=500, max_records=200)
                if not batches:
                    continue
                producer.begin_transaction()
                offsets = {}
                for tp, records in batches.items():
                    for record in records:
                        producer.send(self.output_topic, key=record.key, value=b"T" + (record.value or b""))
                    offsets[tp] = OffsetAndMetadata(records[-1].offset + 1, "", -1)
                producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
                producer.commit_transaction()
                self._count(ctp_transactions=1)
            except Errors.KafkaError as exc:
                log.info("consume-transform-produce: %r; restarting from committed offsets", exc)
                self._count(ctp_errors=1)
                try:
                    if producer is not None:
                        producer.close(timeout=2)
                    if consumer is not None:
                        consumer.close()
                except Errors.KafkaError:
                    pass
                consumer = producer = None
                self._stop.wait(1.0)
        if producer is not None:
            producer.close(timeout=5)
        if consumer is not None:
            consumer.close()

    # -- faults ----------------------------------------------------------------------------------------

    def _register(self, name: str, fault: faults.Fault) -> None:
        with self._lock:
            self._active_faults.append(fault)
            self.stats.faults_injected.append(name)
        log.info("fault injected: %s %s", name, fault)

    def _clear_fault(self, fault: faults.Fault) -> None:
        try:
            fault.clear()
        except Exception as exc:  # clearing must not take the workload down
            log.warning("clearing %s failed: %r", type(fault).__name__, exc)
        with self._lock:
            if fault in self._active_faults:
                self._active_faults.remove(fault)

    def _standing_faults_loop(self) -> None:
        """Demo faults: one hanging transaction for the whole run, and an LSO stall that the coordinator
        times out after transaction.max.timeout.ms, restarted a little later, over and over."""
        if self._stop.wait(5.0):
            return
        while "hanging" in self.scenario.standing_faults and not self._stop.is_set():
            try:
                self._register("hanging", faults.inject_hanging_transaction(
                    self.bootstrap, self.input_topic, 0, transactional_id=f"{self.prefix}-hanging"))
                break
            except LabError as exc:  # the brokers verify partitions (KIP-890): retrying cannot help
                log.warning("could not inject the demo's hanging transaction: %s", exc)
                break
            except Errors.KafkaError as exc:  # e.g. a broker is down right now
                log.warning("could not inject the demo's hanging transaction (%r); retrying", exc)
                self._stop.wait(5.0)
        while "lso_stall" in self.scenario.standing_faults and not self._stop.is_set():
            try:
                stall = faults.start_lso_stall(self.bootstrap, self.input_topic, 1,
                                               transaction_timeout_ms=self.max_timeout_ms,
                                               transactional_id=f"{self.prefix}-stalled")
            except Errors.KafkaError as exc:
                log.warning("could not start the demo's LSO stall (%r); retrying", exc)
                self._stop.wait(5.0)
                continue
            self._register("lso_stall", stall)
            # The coordinator aborts the stalled transaction after max_timeout_ms; pause, then stall again.
            if self._stop.wait(self.max_timeout_ms / 1000 + 15):
                return
            self._clear_fault(stall)

    def _chaos_loop(self) -> None:
        client_side: list[Callable[[], tuple[str, faults.Fault]]] = [
            lambda: ("hanging", faults.inject_hanging_transaction(self.bootstrap, self.input_topic,
                                                                  self._random.randrange(self.scenario.partitions))),
            lambda: ("lso_stall", faults.start_lso_stall(self.bootstrap, self.input_topic,
                                                         self._random.randrange(self.scenario.partitions),
                                                         transaction_timeout_ms=self.max_timeout_ms)),
            lambda: ("coordinator_timeout", faults.coordinator_timeout_abort(self.bootstrap, self.input_topic,
                                                                             wait=False)),
            lambda: ("fencing", faults.fence_producer(self.bootstrap, self.input_topic)),
        ]
        if self.lab is not None and getattr(self.lab, "managed", False):
            brokers = [b.node_id for b in self.lab.brokers]
            client_side += [
                lambda: ("broker_restart", faults.kill_broker(self.lab, self._random.choice(brokers))),
                lambda: ("latency", faults.add_latency(self.lab, self._random.choice(brokers), 100)),
                lambda: ("connection_cut", faults.cut_connections(self.lab, self._random.choice(brokers))),
            ]
        while not self._stop.wait(self.scenario.chaos_interval_s):
            try:
                name, fault = self._random.choice(client_side)()
            except Exception as exc:
                log.warning("chaos fault failed to inject: %r", exc)
                continue
            self._register(name, fault)
            if self._stop.wait(self.scenario.chaos_hold_s):
                break
            self._clear_fault(fault)
