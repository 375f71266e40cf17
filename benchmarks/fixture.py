"""A lab filled fast: thousands of topics, transactional ids, open and hanging transactions and consumer groups.

Raw protocol requests on many connections at once (batched FindCoordinator, InitProducerId, AddPartitionsToTxn
+ transactional Produce v9, OffsetCommit with generation -1), not thousands of producers: a 20,000-id lab is
filled in about a minute on two cores.  Used by poll.py, peers.py and api.py; :func:`fill` is the whole of it.
The lab must run the pre-KIP-890 setting (``Lab(verification=False)``) for ``hanging`` transactions: their
partitions are written without AddPartitionsToTxn, so their coordinator never hears of them.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

import kafka.errors as Errors

TOPIC_PREFIX = "bench-"
#: Open transactions must outlive the run: 15 min, Kafka's default transaction.max.timeout.ms.
TXN_TIMEOUT_MS = 900_000
_RETRIABLE_CODES = {
    Errors.CoordinatorLoadInProgressError.errno, Errors.CoordinatorNotAvailableError.errno,
    Errors.NotCoordinatorError.errno, Errors.ConcurrentTransactionsError.errno,
    Errors.NotLeaderForPartitionError.errno, Errors.UnknownTopicOrPartitionError.errno,
    Errors.NotEnoughReplicasError.errno, Errors.RequestTimedOutError.errno,
}


class RawConnection:
    """One plain TCP connection speaking Kafka with kafka-python's codec, one request at a time.

    Brokers process a connection's requests strictly in order, so concurrency at the
    broker comes from many connections, not from pipelining on one.
    """

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        from kafka.protocol.parser import KafkaProtocol

        self.protocol = KafkaProtocol(client_id="txnwatch-bench-fixture")
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def call(self, request: Any, version: int) -> Any:
        assert self.reader is not None and self.writer is not None
        request.API_VERSION = version
        self.protocol.send_request(request)
        self.writer.write(self.protocol.send_bytes())
        await self.writer.drain()
        while True:
            data = await self.reader.read(1 << 20)
            if not data:
                raise ConnectionError(f"{self.host}:{self.port} closed the connection")
            responses = self.protocol.receive_bytes(data)
            if responses:
                return responses[0][1]

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


@dataclass
class Job:
    node: int
    build: Callable[[], tuple[Any, int]]  # -> (request, version)
    check: Callable[[Any], bool]  # True when done, False to retry


class Pool:
    """`per_node` connections to every broker, each working through that broker's job queue."""

    def __init__(self, brokers: dict[int, tuple[str, int]], per_node: int) -> None:
        self.brokers, self.per_node = brokers, per_node

    async def run(self, jobs: Iterable[Job], what: str, deadline_s: float = 300.0) -> float:
        started = time.monotonic()
        queues: dict[int, asyncio.Queue[Job]] = {n: asyncio.Queue() for n in self.brokers}
        count = 0
        for job in jobs:
            queues[job.node].put_nowait(job)
            count += 1
        failures: list[str] = []

        async def worker(node: int) -> None:
            conn = RawConnection(*self.brokers[node])
            await conn.open()
            try:
                while not queues[node].empty():
                    job = queues[node].get_nowait()
                    for attempt in range(60):
                        request, version = job.build()
                        if job.check(await conn.call(request, version)):
                            break
                        await asyncio.sleep(0.05 * min(attempt + 1, 10))
                    else:
                        failures.append(f"{what}: gave up on a request to broker {node}")
            finally:
                conn.close()

        workers = [worker(n) for n in self.brokers for _ in range(self.per_node)]
        await asyncio.wait_for(asyncio.gather(*workers), deadline_s)
        if failures:
            raise RuntimeError(f"{len(failures)} failed, e.g. {failures[0]}")
        took = time.monotonic() - started
        print(f"  {what}: {count} requests in {took:.1f} s")
        return took


def _ok(code: int) -> bool:
    if code == 0:
        return True
    if code in _RETRIABLE_CODES:
        return False
    raise Errors.for_code(code)(f"error code {code}")


async def find_coordinators(conn: RawConnection, keys: list[str], key_type: int) -> dict[str, int]:
    from kafka.protocol.metadata import FindCoordinatorRequest

    found: dict[str, int] = {}
    deadline = time.monotonic() + 120  # the first group lookup creates __consumer_offsets
    while True:
        missing = [k for k in keys if k not in found]
        if not missing:
            return found
        if time.monotonic() > deadline:
            break
        for start in range(0, len(missing), 5000):
            response = await conn.call(FindCoordinatorRequest(key_type=key_type,
                                                              coordinator_keys=missing[start:start + 5000]), 4)
            for c in response.coordinators:
                if c.error_code == 0:
                    found[c.key] = c.node_id
                elif c.error_code not in _RETRIABLE_CODES:
                    raise Errors.for_code(c.error_code)(f"FindCoordinator {c.key}: {c.error_message}")
        if len(found) < len(keys):
            await asyncio.sleep(0.2)
    raise RuntimeError(f"no coordinator for {len([k for k in keys if k not in found])} keys")


@dataclass
class Scale:
    """Transactional ids (``open_txns`` of them with an open transaction, ``hanging`` of those unknown to their
    coordinator), ``partitions`` in ``topics`` (replication 1), ``groups`` committing on ``offsets_per_group``."""

    ids: int
    open_txns: int
    hanging: int
    partitions: int
    topics: int
    groups: int
    offsets_per_group: int


async def build_fixture(brokers: dict[int, tuple[str, int]], leaders: dict[tuple[str, int], int],
                        scale: Scale, run: str, txn_timeout_ms: int, per_node: int) -> dict[str, Any]:
    from kafka.protocol.consumer import OffsetCommitRequest
    from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
    from kafka.protocol.producer.transaction import AddPartitionsToTxnRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    pool = Pool(brokers, per_node)
    first = RawConnection(*next(iter(brokers.values())))
    await first.open()
    ids = [f"bench-{run}-txn-{i:05d}" for i in range(scale.ids)]
    groups = [f"bench-{run}-group-{i:04d}" for i in range(scale.groups)]
    started = time.monotonic()
    txn_coordinator = await find_coordinators(first, ids, 1)
    group_coordinator = await find_coordinators(first, groups, 0)
    first.close()
    print(f"  FindCoordinator (batched): {len(ids)} ids, {len(groups)} groups in {time.monotonic() - started:.1f} s")

    # 1. Every transactional id gets a producer id: the coordinator now lists it (state Empty).
    producer: dict[str, tuple[int, int]] = {}

    def init_job(tid: str) -> Job:
        def check(response: Any) -> bool:
            if _ok(response.error_code):
                producer[tid] = (response.producer_id, response.producer_epoch)
                return True
            return False
        return Job(txn_coordinator[tid], lambda: (InitProducerIdRequest(
            transactional_id=tid, transaction_timeout_ms=txn_timeout_ms, producer_id=-1, producer_epoch=-1), 4), check)

    took_init = await pool.run((init_job(t) for t in ids), "InitProducerId")

    # 2. Some of them open a transaction: AddPartitionsToTxn then a transactional batch to each partition
    #    (Produce v9, the pre-KIP-890 client path).  The last `hanging` skip AddPartitionsToTxn: their
    #    coordinator never hears of the partition, the production failure mode txnwatch looks for.
    all_tps = sorted(leaders)
    opened = ids[:scale.open_txns]
    txn_tps = {tid: [all_tps[(i * 37 + k * 911) % len(all_tps)] for k in range(1 + i % 3)]
               for i, tid in enumerate(opened)}
    registered = opened[:max(0, scale.open_txns - scale.hanging)]

    def add_job(tid: str) -> Job:
        topic_cls = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in txn_tps[tid]:
            by_topic[topic].append(partition)
        pid, epoch = producer[tid]

        def check(response: Any) -> bool:
            return all(_ok(p.partition_error_code) for t in response.results_by_topic_v3_and_below
                       for p in t.results_by_partition)
        return Job(txn_coordinator[tid], lambda: (AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid, v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[topic_cls(name=t, partitions=ps) for t, ps in by_topic.items()]), 3), check)

    def produce_job(tid: str, tp: tuple[str, int]) -> Job:
        pid, epoch = producer[tid]
        batch = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=pid,
                                          producer_epoch=epoch, base_sequence=0, batch_size=1 << 16)
        batch.append(0, timestamp=None, key=tid.encode(), value=b"open transaction", headers=[])
        records = bytes(batch.build())
        topic_cls = ProduceRequest.TopicProduceData
        part_cls = topic_cls.PartitionProduceData

        def check(response: Any) -> bool:
            return _ok(response.responses[0].partition_responses[0].error_code)
        return Job(leaders[tp], lambda: (ProduceRequest(
            transactional_id=tid, acks=-1, timeout_ms=10_000,
            topic_data=[topic_cls(name=tp[0], partition_data=[part_cls(index=tp[1], records=records)])]), 9), check)

    took_add = await pool.run((add_job(t) for t in registered), "AddPartitionsToTxn")
    took_produce = await pool.run((produce_job(t, tp) for t in opened for tp in txn_tps[t]),
                                  "transactional Produce")

    # 3. Simple consumer groups: offsets committed with generation -1, no members (state Empty).
    def commit_job(index: int, gid: str) -> Job:
        topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
        part_cls = topic_cls.OffsetCommitRequestPartition
        by_topic: dict[str, list[int]] = defaultdict(list)
        for k in range(scale.offsets_per_group):
            topic, partition = all_tps[(index * scale.offsets_per_group + k) % len(all_tps)]
            by_topic[topic].append(partition)

        def check(response: Any) -> bool:
            return all(_ok(p.error_code) for t in response.topics for p in t.partitions)
        return Job(group_coordinator[gid], lambda: (OffsetCommitRequest(
            group_id=gid, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[topic_cls(name=t, partitions=[part_cls(partition_index=p, committed_offset=0,
                                                           committed_leader_epoch=-1, committed_metadata="")
                                                  for p in ps])
                    for t, ps in by_topic.items()]), 8), check)

    took_commit = await pool.run((commit_job(i, g) for i, g in enumerate(groups)), "OffsetCommit")
    return {"init_s": took_init, "add_s": took_add, "produce_s": took_produce, "commit_s": took_commit,
            "tps_in_txns": sum(len(v) for v in txn_tps.values())}


def create_topics(admin: Any, scale: Scale, run: str) -> tuple[dict[tuple[str, int], int], float]:
    from kafka.admin import NewTopic

    started = time.monotonic()
    per_topic = [scale.partitions // scale.topics + (1 if i < scale.partitions % scale.topics else 0)
                 for i in range(scale.topics)]
    names = [f"{TOPIC_PREFIX}{run}-{i}" for i in range(scale.topics)]
    # Replication 1 keeps 5k partitions within the lab's 512 MB brokers; small preallocated indexes.
    configs = {"segment.index.bytes": "65536", "segment.bytes": str(16 << 20)}
    new = [NewTopic(name, count, 1, topic_configs=configs) for name, count in zip(names, per_topic, strict=False)]
    for start in range(0, len(new), 100):  # thousands of small topics in a few requests
        admin.create_topics(new[start:start + 100], timeout_ms=120_000)
    leaders: dict[tuple[str, int], int] = {}
    deadline = time.monotonic() + max(180.0, scale.partitions / 200)  # a loaded 2-core machine at 100k: minutes
    while time.monotonic() < deadline:
        leaders = {(t.get("name") or t.get("topic"), p["partition_index"]): p["leader_id"]
                   for t in admin.describe_topics(names) for p in t["partitions"] if p["leader_id"] >= 0}
        if len(leaders) == scale.partitions:
            break
        time.sleep(1)
    else:
        raise RuntimeError(f"only {len(leaders)}/{scale.partitions} partitions got a leader")
    return leaders, time.monotonic() - started


def fill(bootstrap: str, scale: Scale, connections: int = 8) -> dict[str, Any]:
    """Topics, ids, transactions and groups of ``scale`` on the cluster behind ``bootstrap``; returns what was
    built (the scale, set-up seconds per step)."""
    from kafka.admin import KafkaAdminClient

    started = time.monotonic()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-fixture", request_timeout_ms=300_000)
    try:
        admin.describe_cluster()  # fresh metadata
        brokers = {b.node_id: (b.host, b.port) for b in admin._manager.cluster.brokers()}
        leaders, topics_s = create_topics(admin, scale, uuid.uuid4().hex[:6])
    finally:
        admin.close()
    print(f"  CreateTopics: {scale.partitions:,} partitions in {scale.topics:,} topics, all led, in {topics_s:.0f} s",
          flush=True)
    built = asyncio.run(build_fixture(brokers, leaders, scale, uuid.uuid4().hex[:6], TXN_TIMEOUT_MS, connections))
    print(f"  the lab filled in {time.monotonic() - started:.0f} s", flush=True)
    return {"scale": asdict(scale), "topics_s": topics_s, "setup_s": time.monotonic() - started, **built}
