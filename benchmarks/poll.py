"""Cost of one full cluster poll at production scale, against kafka-python's own tools.

Starts a 3-broker lab, fills it with (default) 10k transactional ids (200 of them
with an open transaction, 20 of those unknown to their coordinator), 5k partitions
(replication 1, five topics) and 500 consumer groups, then measures, each tool in
a fresh subprocess:

* txnwatch's ``ClusterConnection.poll()``: median wall and CPU time of N warm
  polls, the time of each of its rounds, sequential round trips
  (``last_poll_round_trips``), peak RSS (VmHWM) and the part of it the polls add
  over the imported-and-idle process; also a variant watching no topic
  (transactional ids and groups only), the closest to what find_hanging asks;
* kafka-python's ``KafkaAdminClient.find_hanging_transactions()`` on the same
  cluster in the same run (cold: fresh client, coordinators unknown; warm:
  coordinator cache filled), its requests counted: it awaits them one by one, so
  each is a round trip;
* for context, the obvious sequential full poll with ``KafkaAdminClient`` (the
  questions txnwatch asks: transactions, producers, offsets, groups).

Each tool is measured with no added latency and with ``--latency-ms`` added per
broker by the lab proxy (one way, as ``txnwatch lab fault latency``: a round
trip grows by twice that), alternating the two call by call in one process so
that load from elsewhere on the machine drifts into both columns alike.  The
difference of the medians divided by the added round-trip time gives the
*implied* number of sequential round trips, a cross-check of the counted one
(meaningful only on a quiet machine).

The issue's targets (poll <= 2 s on 2 cores, <= 5 round trips with 20 ms per
broker, peak RSS <= 300 MB, >= 10x faster than find_hanging_transactions) are
printed next to the figures; nothing here asserts them.

The fixture is built with raw protocol requests on many connections at once
(batched FindCoordinator, InitProducerId, AddPartitionsToTxn + transactional
Produce v9, OffsetCommit with generation -1), not with thousands of producers.
The run stops by itself (``--max-seconds``) and always tears the lab down.

    python benchmarks/poll.py                # full scale, ~2-3 min on 2 cores
    python benchmarks/poll.py --quick        # 1k ids, 500 partitions, 50 groups
    python benchmarks/poll.py --profile      # plus where the txnwatch poll spends its time
    python benchmarks/poll.py --ids 20000 --partitions 8000 --groups 1000 --latency-ms 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import kafka.errors as Errors

#: The issue's targets; printed, never asserted.
TARGET_POLL_S = 2.0
TARGET_ROUND_TRIPS = 5
TARGET_RSS_MB = 300
TARGET_RATIO = 10.0

TOPIC_PREFIX = "bench-"
_RETRIABLE_CODES = {
    Errors.CoordinatorLoadInProgressError.errno, Errors.CoordinatorNotAvailableError.errno,
    Errors.NotCoordinatorError.errno, Errors.ConcurrentTransactionsError.errno,
    Errors.NotLeaderForPartitionError.errno, Errors.UnknownTopicOrPartitionError.errno,
    Errors.NotEnoughReplicasError.errno, Errors.RequestTimedOutError.errno,
}


# -- memory -------------------------------------------------------------------------------------------


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _memory() -> dict[str, float]:
    return {"rss_mb": _status_kb("VmRSS") / 1024, "hwm_mb": _status_kb("VmHWM") / 1024,
            "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# -- children: each measurement runs in a fresh interpreter ------------------------------------------
#
# A child measures one tool at every latency, alternating them call by call (0, 20, 0, 20, ...), so
# that load from elsewhere on the machine drifts into both columns alike.


def _measure(call: Callable[[], Any], trips: Callable[[], int], repeat: int, latencies: list[float],
             proxy_port: int | None, profile: bool = False,
             rounds: Callable[[], list[float]] | None = None) -> dict[str, Any]:
    from txnwatch.lab.proxy import ProxyControl

    proxy = ProxyControl(proxy_port) if proxy_port else None
    by_latency: dict[str, dict[str, Any]] = {str(lat): {"samples_s": [], "cpu_s": [], "trips": [], "rounds_s": []}
                                             for lat in latencies}
    try:
        for _ in range(repeat):
            for lat in latencies:
                if proxy is not None:
                    proxy.delay(None, lat)
                trips()
                if rounds is not None:
                    rounds()
                wall, cpu = time.perf_counter(), time.process_time()
                call()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                row = by_latency[str(lat)]
                row["samples_s"].append(wall)
                row["cpu_s"].append(cpu)
                row["trips"].append(trips())
                if rounds is not None:
                    row["rounds_s"].append(rounds())
    finally:
        if proxy is not None:
            proxy.delay(None, 0)
    for row in by_latency.values():
        row["median_s"] = statistics.median(row["samples_s"])
        row["cpu_median_s"] = statistics.median(row["cpu_s"])
        if row["rounds_s"]:
            width = max(len(r) for r in row["rounds_s"])
            row["rounds_median_s"] = [statistics.median([r[i] for r in row["rounds_s"] if len(r) > i])
                                      for i in range(width)]
    result: dict[str, Any] = {"by_latency": by_latency}
    if profile:  # extra calls, so that the sampler's own cost stays out of the figures above
        if proxy is not None:
            proxy.delay(None, 0)
        sampler = _Sampler()
        sampler.start()
        for _ in range(repeat):
            call()
        sampler.stop()
        result["profile"] = sampler.summary()
    return result


class _Sampler:
    """A tiny sampling profiler over every thread: the poll runs on kafka-python's IO thread, out of
    cProfile's sight.  Counts, per function, samples where it was innermost (own) or anywhere (incl.)."""

    def __init__(self, interval_s: float = 0.002) -> None:
        import threading
        self.interval_s = interval_s
        self.own: dict[str, int] = defaultdict(int)
        self.incl: dict[str, int] = defaultdict(int)
        self.samples = 0
        self._running = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def start(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._running.clear()

    def _loop(self) -> None:
        import threading
        me, main = threading.get_ident(), threading.main_thread().ident
        while True:
            self._running.wait()
            for ident, top in sys._current_frames().items():
                frame: FrameType | None = top
                if ident in (me, main):
                    continue
                seen: set[str] = set()
                inner = True
                while frame is not None:
                    code = frame.f_code
                    path = Path(code.co_filename)
                    name = f"{path.parent.parent.name}/{path.parent.name}/{path.name}:{code.co_name}"
                    if inner:
                        self.own[name] += 1
                        inner = False
                    if name not in seen:
                        self.incl[name] += 1
                        seen.add(name)
                    frame = frame.f_back
                self.samples += 1
            time.sleep(self.interval_s)

    def summary(self, top: int = 12) -> str:
        total = max(1, self.samples)
        lines = [f"{self.samples} thread samples every {self.interval_s * 1000:g} ms (idle waits included)",
                 "  own time:"]
        lines += [f"    {n * 100 / total:5.1f}%  {name}" for name, n in
                  sorted(self.own.items(), key=lambda kv: -kv[1])[:top]]
        lines.append("  inclusive, txnwatch and kafka-python frames:")
        lines += [f"    {n * 100 / total:5.1f}%  {name}" for name, n in
                  sorted(((k, v) for k, v in self.incl.items() if "txnwatch/" in k or "kafka/" in k),
                         key=lambda kv: -kv[1])[:top]]
        return "\n".join(lines)


def _cold(call: Callable[[], Any], trips: Callable[[], int]) -> dict[str, Any]:
    trips()
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return {"cold_s": time.perf_counter() - wall, "cold_cpu_s": time.process_time() - cpu, "cold_trips": trips()}


def child_txnwatch(bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None,
                   watch_topics: bool = True, profile: bool = False) -> dict[str, Any]:
    from txnwatch.core.model import ClusterSnapshot, TxnState
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    idle = _memory()  # interpreter + txnwatch + kafka-python imported, nothing polled yet
    settings = ClusterConnectionSettings(name="bench", bootstrap_servers=tuple(bootstrap.split(",")),
                                         request_timeout_ms=30_000,
                                         # a name no topic has: transactional ids and groups only
                                         topics_include=() if watch_topics else ("bench-no-such-topic",))
    latest: list[ClusterSnapshot] = []

    def poll() -> None:
        # The previous snapshot stays alive while the next is built, as in the service.
        latest[:] = [connection.poll()]

    rounds = _time_exchanges()
    with ClusterConnection(settings) as connection:
        result = _cold(poll, lambda: connection.last_poll_round_trips)  # bootstrap, connections, broker config
        result.update(_measure(poll, lambda: connection.last_poll_round_trips, repeat, latencies, proxy_port,
                               profile, rounds))
        peak = _memory()
    snapshot = latest[0]
    states: dict[str, int] = defaultdict(int)
    for description in snapshot.transactions.values():
        states[str(description.state)] += 1
    result.update({
        "idle": idle, "peak": peak,
        "brokers": len(snapshot.brokers), "listed": len(snapshot.listed), "described": len(snapshot.transactions),
        "open": sum(1 for d in snapshot.transactions.values() if TxnState(d.state).is_open),
        "partitions": len(snapshot.partitions),
        "partitions_open": sum(1 for p in snapshot.partitions.values()
                               if any(s.current_txn_start_offset is not None for s in p.producers or ())),
        "groups": len(snapshot.groups),
        "group_offsets": sum(len(g.offsets) for g in snapshot.groups.values()),
        "errors": len(snapshot.errors), "error_sample": [f"{e.api} {e.target} {e.name}" for e in snapshot.errors[:5]],
        "states": dict(states),
    })
    return result


def _time_exchanges() -> Callable[[], list[float]]:
    """Wall time of each exchange (round) of a poll: sending, waiting for the brokers, decoding the answers;
    what a poll spends beyond their sum is txnwatch folding answers into the snapshot."""
    from txnwatch.kafka.wire import ManagerWire

    original = ManagerWire.exchange
    spans: list[float] = []

    async def exchange(self: Any, calls: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(self, calls)
        finally:
            spans.append(time.perf_counter() - started)

    ManagerWire.exchange = exchange  # type: ignore[method-assign]  # instrumenting the wire for the benchmark: count every exchange

    def take() -> list[float]:
        taken = list(spans)
        spans.clear()
        return taken
    return take


def child_txnwatch_ids(bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None,
                       profile: bool = False) -> dict[str, Any]:
    return child_txnwatch(bootstrap, repeat, latencies, proxy_port, watch_topics=False)


def _counting(admin: Any) -> Callable[[], int]:
    """kafka-python's admin client awaits each request before the next: its sends are its round trips."""
    manager = admin._manager
    original = manager.send
    sent = [0]

    def send(*args: Any, **kwargs: Any) -> Any:
        sent[0] += 1
        return original(*args, **kwargs)

    manager.send = send

    def take() -> int:
        value, sent[0] = sent[0], 0
        return value
    return take


def child_hanging(bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None,
                  profile: bool = False) -> dict[str, Any]:
    from kafka.admin import KafkaAdminClient

    idle = _memory()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-find-hanging", request_timeout_ms=60_000)
    sends = _counting(admin)
    found: list[Any] = []

    def find() -> None:
        found[:] = admin.find_hanging_transactions()

    result = _cold(find, sends)  # coordinators of the ids unknown: one batched FindCoordinator more
    result.update(_measure(find, sends, repeat, latencies, proxy_port))
    result.update({"idle": idle, "peak": _memory(), "hanging": len(found)})
    admin.close()
    return result


def sequential_poll(admin: Any) -> None:
    """txnwatch's questions asked the obvious way: one awaited admin call after another."""
    from kafka.protocol.consumer.offsets import IsolationLevel, OffsetSpec
    from kafka.structs import TopicPartition

    topics = [t for t in admin.list_topics() if not t.startswith("__")]
    described = admin.describe_topics(topics)
    listings = admin.list_transactions()
    ids = {t.transactional_id for rows in listings.values() for t in rows}
    if ids:
        admin.describe_transactions(ids)
    tps = [TopicPartition(t.get("name") or t.get("topic"), p["partition_index"])
           for t in described for p in t["partitions"]]
    admin.describe_producers(tps)
    admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST))
    admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.LATEST), isolation_level=IsolationLevel.READ_COMMITTED)
    admin.list_partition_offsets(dict.fromkeys(tps, OffsetSpec.EARLIEST))
    groups = [g["group_id"] for g in admin.list_groups()]
    if groups:
        admin.list_group_offsets(dict.fromkeys(groups))


def child_sequential(bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None,
                     profile: bool = False) -> dict[str, Any]:
    from kafka.admin import KafkaAdminClient

    idle = _memory()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-sequential", request_timeout_ms=60_000)
    sends = _counting(admin)
    result = _cold(lambda: sequential_poll(admin), sends)  # fills the coordinator and leader caches
    result.update(_measure(lambda: sequential_poll(admin), sends, repeat, latencies, proxy_port))
    result.update({"idle": idle, "peak": _memory()})
    admin.close()
    return result


CHILDREN: dict[str, Callable[..., dict[str, Any]]] = {
    "txnwatch": child_txnwatch, "txnwatch-ids": child_txnwatch_ids, "hanging": child_hanging,
    "sequential": child_sequential}


def run_child(kind: str, bootstrap: str, repeat: int, latencies: list[float], proxy_port: int | None,
              timeout: float, profile: bool = False) -> dict[str, Any] | None:
    """Run one measurement in a fresh interpreter; None (and the reason printed) if it failed."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--bootstrap", bootstrap,
           "--repeat", str(repeat), "--child-latencies", ",".join(str(x) for x in latencies)]
    if proxy_port:
        cmd += ["--proxy-port", str(proxy_port)]
    if profile:
        cmd.append("--profile")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        print(f"  ! {kind}: gave up after {timeout:.0f} s")
        return None
    if proc.returncode != 0 or not out.strip():
        print(f"  ! {kind}: exit {proc.returncode}: {err.strip().splitlines()[-1:] if err.strip() else ''}")
        return None
    return json.loads(out.strip().splitlines()[-1])


# -- fixture: raw protocol on many connections at once -----------------------------------------------


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
    for start in range(0, len(new), 100):  # thousands of small topics (benchmarks/biglab.py) in a few requests
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


def broker_heaps(lab: Any) -> list[str]:
    """Old-generation occupancy per broker JVM after the run (SerialGC), via jstat when available."""
    rows = []
    for node in lab.brokers:
        try:
            out = subprocess.run(["jstat", "-gc", str(node.pid)], capture_output=True, text=True, timeout=20).stdout
            head, values = out.split("\n")[:2]
            gc = dict(zip(head.split(), values.split(), strict=False))
            used = sum(float(gc[k]) for k in ("S0U", "S1U", "EU", "OU")) / 1024
            rows.append(f"broker {node.node_id}: heap used {used:.0f} MB (old gen {float(gc['OU']) / 1024:.0f} "
                        f"of {float(gc['OC']) / 1024:.0f} MB), full GCs {gc.get('FGC', '?')}")
        except Exception as exc:  # jstat missing or refused: the figure is a nicety
            rows.append(f"broker {node.node_id}: heap unknown ({type(exc).__name__})")
    oom = [p.name for p in Path(lab.lab_dir).rglob("*.log")
           if "OutOfMemoryError" in p.read_text(errors="replace")]
    if oom:
        rows.append(f"OutOfMemoryError in {oom}")
    return rows


# -- report ---------------------------------------------------------------------------------------------


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms"


def _trips(values: list[int] | None) -> str:
    if not values:
        return "-"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _verdict(ok: bool) -> str:
    return "meets target" if ok else "MISSES target"


def report(scale: Scale, latency_ms: float, results: dict[str, dict[str, Any] | None], repeat: int,
           loads: list[float]) -> None:
    latencies = [0.0] + ([float(latency_ms)] if latency_ms else [])

    def get(kind: str, lat: float) -> dict[str, Any] | None:
        result = results.get(kind)
        if not result:
            return None
        return {**result, **result["by_latency"][str(lat)]}

    seen = results.get("txnwatch")
    print()
    print("=" * 100)
    print(f"scale requested: {scale.ids} transactional ids ({scale.open_txns} with an open transaction, "
          f"{scale.hanging} of them unknown to their coordinator), {scale.partitions} partitions "
          f"(replication 1) in {scale.topics} topics, {scale.groups} groups x {scale.offsets_per_group} offsets")
    if seen:
        print(f"scale seen by the poll: {seen['brokers']} brokers, {seen['listed']} listed / {seen['described']} "
              f"described transactional ids ({seen['open']} open; states {seen['states']}), "
              f"{seen['partitions']} partitions ({seen['partitions_open']} with an open transaction), "
              f"{seen['groups']} groups ({seen['group_offsets']} committed offsets), {seen['errors']} request errors "
              f"{seen['error_sample'] or ''}")
    rtt = 2 * latency_ms
    print(f"times: medians of {repeat} warm calls per column, each tool in a fresh process, columns alternated "
          f"call by call; 'cold' = first call of a fresh client, no added latency")
    if latency_ms:
        print(f"latency column: {latency_ms:g} ms added one way per broker by the lab proxy "
              f"(+{rtt:g} ms per round trip)")
    if loads:
        print(f"machine load average (1 min) during the measurements: {min(loads):.1f}-{max(loads):.1f} "
              f"on {os.cpu_count()} cores (brokers, proxy and anything else running share them)")
    print()
    header = f"{'':48}" + "".join(f"{('no added latency' if not lat else f'+{lat:g} ms/broker'):>22}"
                                  for lat in latencies)
    print(header)
    print("-" * len(header))

    def row(label: str, kind: str, render: Callable[[dict[str, Any]], str]) -> None:
        cells = []
        for lat in latencies:
            r = get(kind, lat)
            cells.append(render(r) if r else "-")
        print(f"{label:48}" + "".join(f"{c:>22}" for c in cells))

    def cold(r: dict[str, Any]) -> str:
        return f"{_ms(r['cold_s'])}" if r is not None else "-"

    def spread(r):
        return (f"{min(r['samples_s']) * 1000:,.0f}-{max(r['samples_s']) * 1000:,.0f} ms")
    row("txnwatch poll: wall time (median)", "txnwatch", lambda r: _ms(r["median_s"]))
    row("  wall time (min-max)", "txnwatch", spread)
    row("  CPU time of the polling process (median)", "txnwatch", lambda r: _ms(r["cpu_median_s"]))
    row("  round trips (counted)", "txnwatch", lambda r: _trips(r["trips"]))
    row("  each round, median (send..answers decoded)", "txnwatch",
        lambda r: " / ".join(f"{x * 1000:.0f}" for x in r.get("rounds_median_s", [])) + " ms")
    row("  rest: folding, thread hand-off, GIL waits", "txnwatch",
        lambda r: _ms(r["median_s"] - sum(r.get("rounds_median_s", []))))
    row("  cold first poll (bootstrap included)", "txnwatch", cold)
    row("  peak RSS of the process (VmHWM)", "txnwatch", lambda r: f"{r['peak']['hwm_mb']:.0f} MB")
    row("  RSS the polls add over the idle process", "txnwatch",
        lambda r: f"{r['peak']['hwm_mb'] - r['idle']['hwm_mb']:.0f} MB")
    row("txnwatch poll, ids + groups only (no topics)", "txnwatch-ids", lambda r: _ms(r["median_s"]))
    row("  CPU time (median)", "txnwatch-ids", lambda r: _ms(r["cpu_median_s"]))
    row("  round trips (counted)", "txnwatch-ids", lambda r: _trips(r["trips"]))
    row("find_hanging_transactions: wall time (median)", "hanging", lambda r: _ms(r["median_s"]))
    row("  wall time (min-max)", "hanging", spread)
    row("  CPU time (median)", "hanging", lambda r: _ms(r["cpu_median_s"]))
    row("  requests awaited one by one", "hanging", lambda r: _trips(r["trips"]))
    row("  cold first call (+ batched FindCoordinator)", "hanging",
        lambda r: f"{_ms(r['cold_s'])}, {r['cold_trips']} req")
    row("  peak RSS", "hanging", lambda r: f"{r['peak']['hwm_mb']:.0f} MB")
    row("sequential full poll (KafkaAdminClient)", "sequential", lambda r: _ms(r["median_s"]))
    row("  CPU time (median)", "sequential", lambda r: _ms(r["cpu_median_s"]))
    row("  requests awaited one by one", "sequential", lambda r: _trips(r["trips"]))
    row("  peak RSS", "sequential", lambda r: f"{r['peak']['hwm_mb']:.0f} MB")

    def ratio_row(label: str, slow: str, fast: str, key: str = "median_s") -> None:
        cells = []
        for lat in latencies:
            a, b = get(slow, lat), get(fast, lat)
            cells.append(f"{a[key] / b[key]:.2f}x" if a and b and b[key] else "-")
        print(f"{label:48}" + "".join(f"{c:>22}" for c in cells))

    print()
    ratio_row("find_hanging / txnwatch poll (wall)", "hanging", "txnwatch")
    ratio_row("find_hanging / txnwatch poll (CPU)", "hanging", "txnwatch", "cpu_median_s")
    ratio_row("find_hanging / txnwatch ids+groups poll (wall)", "hanging", "txnwatch-ids")
    ratio_row("sequential full poll / txnwatch poll (wall)", "sequential", "txnwatch")

    if latency_ms:
        print()
        for kind, label in (("txnwatch", "txnwatch poll"), ("txnwatch-ids", "txnwatch ids+groups poll"),
                            ("hanging", "find_hanging_transactions"), ("sequential", "sequential full poll")):
            base, slow = get(kind, 0.0), get(kind, float(latency_ms))
            if base and slow:
                implied = (slow["median_s"] - base["median_s"]) / (rtt / 1000)
                print(f"implied sequential round trips, {label}: {implied:.1f} "
                      f"(difference of the medians / {rtt:g} ms; counted {_trips(slow['trips'])})")

    print()
    print("targets (issue), printed not asserted:")
    ours, ours_lat = get("txnwatch", 0.0), (get("txnwatch", float(latency_ms)) if latency_ms else None)
    if ours:
        print(f"  wall time <= {TARGET_POLL_S:g} s on 2 cores: {_ms(ours['median_s'])} "
              f"(max {_ms(max(ours['samples_s']))}) -> {_verdict(ours['median_s'] <= TARGET_POLL_S)}")
    if ours_lat:
        worst = max(ours_lat["trips"])
        print(f"  round trips <= {TARGET_ROUND_TRIPS} with {latency_ms:g} ms per broker: {worst} counted -> "
              f"{_verdict(worst <= TARGET_ROUND_TRIPS)}; wall time there {_ms(ours_lat['median_s'])}")
    if ours:
        peak = ours["peak"]["hwm_mb"]
        print(f"  peak RSS <= {TARGET_RSS_MB} MB: {peak:.0f} MB -> {_verdict(peak <= TARGET_RSS_MB)}")
    theirs = results.get("hanging")
    if ours and theirs:
        for lat in latencies:
            a, b = get("hanging", lat), get("txnwatch", lat)
            assert a and b
            ratio = a["median_s"] / b["median_s"]
            print(f"  >= {TARGET_RATIO:g}x faster than find_hanging_transactions "
                  f"({f'+{lat:g} ms' if lat else 'no added latency'}): {ratio:.2f}x -> "
                  f"{_verdict(ratio >= TARGET_RATIO)}")
    if ours and ours.get("profile"):
        print()
        print("where the txnwatch poll spends its time (sampled over the warm polls without added latency):")
        print(ours["profile"])
    print("=" * 100)


# -- main ------------------------------------------------------------------------------------------------


class Timeout(Exception):
    pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1k ids, 500 partitions, 50 groups, 3 repeats")
    parser.add_argument("--ids", type=int, help="transactional ids (default 10000)")
    parser.add_argument("--open", type=int, help="of which with an open transaction (default 200)")
    parser.add_argument("--hanging", type=int, help="of the open ones, unknown to their coordinator (default 20)")
    parser.add_argument("--partitions", type=int, help="partitions, replication 1 (default 5000)")
    parser.add_argument("--topics", type=int, help="topics they are spread over (default 5)")
    parser.add_argument("--groups", type=int, help="consumer groups with committed offsets (default 500)")
    parser.add_argument("--offsets-per-group", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=20.0, help="one-way latency per broker (0: skip)")
    parser.add_argument("--repeat", type=int, help="warm calls per measurement (default 5)")
    parser.add_argument("--no-sequential", action="store_true", help="skip the sequential full-poll baseline")
    parser.add_argument("--connections", type=int, default=8, help="fixture connections per broker")
    parser.add_argument("--max-seconds", type=int, default=900, help="give up (and tear down) after this long")
    parser.add_argument("--profile", action="store_true", help="also print a cProfile summary of the txnwatch poll")
    parser.add_argument("--child", choices=sorted(CHILDREN), help=argparse.SUPPRESS)
    parser.add_argument("--child-latencies", default="0", help=argparse.SUPPRESS)
    parser.add_argument("--proxy-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        latencies = [float(x) for x in args.child_latencies.split(",")]
        print(json.dumps(CHILDREN[args.child](args.bootstrap, args.repeat, latencies, args.proxy_port,
                                              profile=args.profile)))
        return

    quick = args.quick
    scale = Scale(ids=args.ids or (1_000 if quick else 10_000), open_txns=args.open or (50 if quick else 200),
                  hanging=args.hanging if args.hanging is not None else (5 if quick else 20),
                  partitions=args.partitions or (500 if quick else 5_000), topics=args.topics or 5,
                  groups=args.groups or (50 if quick else 500), offsets_per_group=args.offsets_per_group)
    repeat = args.repeat or (3 if quick else 5)
    run = uuid.uuid4().hex[:6]

    def on_alarm(signum: int, frame: Any) -> None:
        raise Timeout(f"benchmark exceeded --max-seconds {args.max_seconds}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.max_seconds)
    t0 = time.monotonic()

    from kafka.admin import KafkaAdminClient

    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LabSettings, TransactionSettings

    # Open transactions must outlive the run: a 15 min timeout (Kafka's default maximum).
    txn_timeout_ms = 900_000
    lab_dir = tempfile.mkdtemp(prefix="txnwatch-bench-")
    print(f"starting a 3-broker lab in {lab_dir}")
    # Pre-KIP-890 (verification off), as this benchmark has always measured: some transactions are opened with
    # raw Produce requests the way hanging ones are.
    lab = start_lab(LabSettings(brokers=3, transactions=TransactionSettings(max_timeout_ms=txn_timeout_ms,
                                                                           partition_verification_enable=False)),
                    lab_dir, die_with_parent=True, quiet=True)
    results: dict[str, dict[str, Any] | None] = {}
    completed = False
    try:
        bootstrap = lab.bootstrap_servers
        print(f"lab up in {time.monotonic() - t0:.0f} s: {bootstrap}")
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-setup", request_timeout_ms=120_000)
        admin.describe_cluster()  # fresh metadata
        brokers = {b.node_id: (b.host, b.port) for b in admin._manager.cluster.brokers()}
        print("building the fixture")
        leaders, took = create_topics(admin, scale, run)
        print(f"  CreateTopics: {scale.partitions} partitions in {scale.topics} topics, all led, in {took:.1f} s")
        fixture = asyncio.run(build_fixture(brokers, leaders, scale, run, txn_timeout_ms, args.connections))
        admin.close()
        print(f"fixture ready at {time.monotonic() - t0:.0f} s ({fixture['tps_in_txns']} partitions written "
              f"in open transactions)")

        latencies = [0.0] + ([float(args.latency_ms)] if args.latency_ms and lab.proxy is not None else [])
        proxy_port = lab.proxy.control_port if lab.proxy is not None else None
        kinds = ["txnwatch", "txnwatch-ids", "hanging"] + ([] if args.no_sequential else ["sequential"])
        loads: list[float] = []
        print(f"measuring {', '.join(kinds)}; latencies {latencies} ms one way, alternated")
        for kind in kinds:
            started = time.monotonic()
            loads.append(os.getloadavg()[0])
            result = run_child(kind, bootstrap, repeat, latencies, proxy_port, timeout=300,
                               profile=args.profile and kind == "txnwatch")
            loads.append(os.getloadavg()[0])
            results[kind] = result
            if result:
                medians = ", ".join(f"{_ms(row['median_s'])} at +{lat} ms" for lat, row in result["by_latency"].items())
                print(f"  {kind}: {medians} ({time.monotonic() - started:.0f} s with process start)")
        heaps = broker_heaps(lab)
        report(scale, args.latency_ms if len(latencies) > 1 else 0.0, results, repeat, loads)
        print("brokers after the run (512 MB heaps): " + "; ".join(heaps))
        print(f"total run time {time.monotonic() - t0:.0f} s")
        completed = True
    finally:
        signal.alarm(0)
        print("tearing the lab down")
        lab.down()
        if completed:  # a failed run keeps its broker logs for a look
            shutil.rmtree(lab_dir, ignore_errors=True)
        else:
            print(f"lab directory kept for its logs: {lab_dir}")


if __name__ == "__main__":
    main()
