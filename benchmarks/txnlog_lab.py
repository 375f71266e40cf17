"""The transaction-log tail through kafka-python, against a lab broker's real ``__transaction_state``.

Used by ``benchmarks/txnlog.py`` (its default figures); runnable alone for one side:

    .venv/bin/python benchmarks/txnlog_lab.py floor BOOTSTRAP RECORDS   # kafka-python alone, JSON line
    .venv/bin/python benchmarks/txnlog_lab.py tail-python BOOTSTRAP RECORDS  # the tail, its batch walk in Python
    .venv/bin/python benchmarks/txnlog_lab.py tail BOOTSTRAP RECORDS    # the daemon's tail, JSON line
    .venv/bin/python benchmarks/txnlog_lab.py trail BOOTSTRAP SECONDS   # the tail from the log's end, lag per record
    .venv/bin/python benchmarks/txnlog_lab.py trail-topic BOOTSTRAP SECONDS TOPIC   # the same on a replay topic

The log is filled by Kafka's own Java producer (ProducerPerformance with a transactional id and a short
``--transaction-duration-ms``): on Kafka 4 it is a transaction version 2 client, so the coordinator writes
what it writes for every real TV2 transaction (Ongoing when the partition leader adds the partition,
PrepareCommit with the epoch bumped, CompleteCommit).

Each side runs in its own child process so that its CPU seconds are its own:

* **floor**: a ``KafkaConsumer`` with the tail's own settings reads every partition of the topic from the
  beginning and touches nothing (kafka-python's fetch, CRC check and record objects: what any tail through
  kafka-python pays at least);
* **tail**: the daemon's ``ClusterTail`` over ``TransactionLogTail`` (fetch, decode, apply, one SQLite
  transaction per second of records) from the beginning until its stored positions reach the log's end;
* **trail**: the same tail started at the log's end while producers write, for a fixed time; per record, the
  time from the coordinator's append (the record's timestamp, the broker's clock on this machine) to the end of
  the database transaction that stored it.
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
sys.path.append(str(Path(__file__).resolve().parents[1]))  # benchmarks' own modules (appended: never ahead of a baseline)

from benchmarks.thread_cpu import thread_cpu_s

TOPIC = "__transaction_state"


# -- the children ----------------------------------------------------------------------------------

def fetch_config() -> dict[str, int]:
    """The tail's kafka-python fetch settings, or ``TXNLOG_BENCH_FETCH``'s (JSON) over them, to compare settings."""
    from txnwatch.kafka import txnlog

    config = {**txnlog.FETCH_CONFIG, **json.loads(os.environ.get("TXNLOG_BENCH_FETCH", "{}"))}
    txnlog.FETCH_CONFIG = config  # what TransactionLogTail reads when it builds its consumer
    return config


def _consumer(bootstrap: str) -> Any:
    """A consumer configured like ``TransactionLogTail``'s own (fetch sizes, max poll records)."""
    from kafka import KafkaConsumer

    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", **fetch_config())


def floor(bootstrap: str, expected: int) -> dict[str, Any]:
    """kafka-python alone: every record of the topic, from the beginning, nothing done with them."""
    from kafka import TopicPartition

    # Its opening (consumer, metadata, positions) apart: the tail's figures include its own (txnlog.py shows both).
    opening_wall, opening_cpu = time.perf_counter(), time.process_time()
    consumer = _consumer(bootstrap)
    partitions = [TopicPartition(TOPIC, p) for p in sorted(consumer.partitions_for_topic(TOPIC) or ())]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    for tp in partitions:
        consumer.position(tp)
    read, deadline = 0, time.monotonic() + 600
    wall, cpu = time.perf_counter(), time.process_time()
    opening_wall, opening_cpu = wall - opening_wall, cpu - opening_cpu
    while read < expected and time.monotonic() < deadline:
        read += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    threads = thread_cpu_s()
    consumer.close()
    return {"records": read, "wall_s": wall, "cpu_s": cpu, "threads": threads, "opening_wall_s": opening_wall,
            "opening_cpu_s": opening_cpu}


def _store() -> tuple[Any, Any]:
    """A migrated SQLite file and the cluster registered in it, as the daemon has them at start."""
    from benchmarks.scratch_store import scratch_store

    engine, sessions, _ = scratch_store("txnlog-lab-bench-", bootstrap="lab")
    return engine, sessions


class _Stamped:
    """The tail's ``Tail``, keeping the timestamps of what was read and not yet stored (trail only)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.unstored: list[int] = []
        self.fetched: list[float] = []  # append -> returned by read(), seconds: the fetch's share of the lag

    def read(self, timeout_ms: int = 0) -> Any:
        records, problems = self.inner.read(timeout_ms)
        stamps = [r.timestamp_ms for r in records if r.timestamp_ms is not None]
        self.unstored.extend(stamps)
        now_ms = time.time() * 1000
        self.fetched.extend((now_ms - at) / 1000 for at in stamps)
        return records, problems

    def positions(self) -> dict[int, int]:
        return dict(self.inner.positions())

    def end_offsets(self) -> dict[int, int]:
        return dict(self.inner.end_offsets())

    def close(self) -> None:
        self.inner.close()


def _tail(bootstrap: str, *, from_beginning: bool, stamped: bool,
          topic: str = TOPIC) -> tuple[Any, Any, list[Any], list[float]]:
    """The daemon's ClusterTail over TransactionLogTail (as runtime/wiring.py builds it), on a fresh store."""
    from txnwatch.collect.txnlog_tail import ClusterTail
    from txnwatch.core.views import LatestState
    from txnwatch.kafka import ClusterConnectionSettings, TransactionLogTail

    engine, sessions = _store()
    connection = ClusterConnectionSettings(name="bench", bootstrap_servers=(bootstrap,))
    opened: list[Any] = []
    lags: list[float] = []

    config = fetch_config()

    def open_tail(positions: Mapping[int, int]) -> Any:
        tail: Any = TransactionLogTail(connection, positions=positions, from_beginning=from_beginning,
                                       max_poll_records=config["max_poll_records"], topic=topic)
        if stamped:
            tail = _Stamped(tail)
        opened.append(tail)
        return tail

    class Timed(ClusterTail):
        """Stamps each commit when it lands: the k-th commit the writer thread finishes is the k-th handed off
        (a failed write would shift them; the benchmark's store does not fail)."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.handed: list[list[int]] = []
            self.landed: list[float] = []

        def _flush(self, now: float) -> bool:
            before = self._inflight
            stamps = list(opened[-1].unstored) if stamped and opened else []
            stored = super()._flush(now)
            if stored and stamped and self._inflight is not None and self._inflight is not before:
                opened[-1].unstored.clear()
                self.handed.append(stamps)
            return stored

        def _write(self, *args: Any, **kwargs: Any) -> None:
            super()._write(*args, **kwargs)
            self.landed.append(time.time() * 1000)

    busy = os.environ.get("TXNLOG_BENCH_BUSY_COMMIT_MS")  # transaction_log.busy_commit_ms, to compare settings
    built = Timed("bench", bootstrap, open_tail, sessions, LatestState(["bench"]),
                  **({"commit_busy_s": int(busy) / 1000} if busy else {}))
    gc.freeze()  # the start-up objects, as the daemon leaves them after its start (txnwatch.serve.server)
    return engine, built, opened, lags


def _lags(built: Any) -> list[float]:
    """Append-to-stored seconds of every record whose commit landed."""
    return [(done - at) / 1000 for stamps, done in zip(built.handed, built.landed, strict=False) for at in stamps]


def tail(bootstrap: str, expected: int) -> dict[str, Any]:
    """The daemon's tail from the beginning until every record up to the log's end is stored."""
    engine, cluster_tail, opened, _ = _tail(bootstrap, from_beginning=True, stamped=False)
    wall, cpu = time.perf_counter(), time.process_time()
    while not opened:
        cluster_tail.step()
    ends = opened[-1].end_offsets()
    deadline = time.monotonic() + 900
    first = time.perf_counter() if cluster_tail._counters or cluster_tail._pending else 0.0
    while time.monotonic() < deadline and not all(opened[-1].positions().get(p, 0) >= e for p, e in ends.items()):
        if cluster_tail.step() and not first:
            first = time.perf_counter()
    # Read to the end (as the floor stops at its count, with no empty fetch to wait out): stop as the daemon
    # does, which commits what was applied, the commit in flight first.
    read = time.perf_counter()
    threads = thread_cpu_s()  # before the stop ends the writer thread: its last commit is not in its figure
    cluster_tail.close()
    done = time.perf_counter()
    wall, cpu = done - wall, time.process_time() - cpu
    stored = _stored_records(engine)
    engine.dispose()
    # Wall before the first records (opening: stored positions, consumer, metadata, first fetch) and after the
    # last read (the last commit, which nothing overlaps): the floor's wall has neither.
    return {"records": stored, "wall_s": wall, "cpu_s": cpu, "expected": expected, "threads": threads,
            "to_first_s": first - (done - wall) if first else 0.0, "last_commit_s": done - read}


def _stored_records(engine: Any) -> int:
    """The records the committed counters hold (what the tail stored, read back from the database)."""
    from sqlalchemy import text

    with engine.connect() as connection:
        return int(connection.execute(text("SELECT value FROM txnlog_counters WHERE name = 'records'")).scalar() or 0)


def trail(bootstrap: str, seconds: float, topic: str = TOPIC) -> dict[str, Any]:
    """The tail from the log's end for ``seconds`` while producers write: lag per stored record.  ``topic``:
    another topic holding coordinator records (benchmarks/txnlog_replay.py's replay)."""
    engine, cluster_tail, opened, _ = _tail(bootstrap, from_beginning=False, stamped=True, topic=topic)
    while not opened:
        cluster_tail.step()
    print(json.dumps({"ready": True}), flush=True)  # at the log's end now: a replay may start writing
    first = sum(opened[-1].positions().values())
    wall, cpu, waited = time.perf_counter(), time.process_time(), _run_queue_s()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cluster_tail.step() == 0:
            time.sleep(0.2)  # as TxnLogService does after an empty step
    wall, cpu, waited = time.perf_counter() - wall, time.process_time() - cpu, _run_queue_s() - waited
    behind = sum(max(0, e - opened[-1].positions().get(p, e)) for p, e in opened[-1].end_offsets().items())
    read = sum(opened[-1].positions().values()) - first
    threads = thread_cpu_s()  # before close() ends the writer thread
    cluster_tail.close()
    engine.dispose()
    lags = sorted(_lags(cluster_tail))
    if not lags:
        return {"records": read, "wall_s": wall, "cpu_s": cpu, "behind_at_end": behind, "stored": 0,
                "run_queue_s": waited}
    fetched = sorted(x for t in opened for x in t.fetched)
    return {"records": read, "wall_s": wall, "cpu_s": cpu, "behind_at_end": behind, "stored": len(lags),
            "run_queue_s": waited, "commits": len(cluster_tail.landed), "threads": threads,
            "p50": statistics.median(lags), "p99": lags[min(len(lags) - 1, int(len(lags) * 0.99))],
            "max": lags[-1], "fetched_p50": statistics.median(fetched),
            "fetched_p99": fetched[min(len(fetched) - 1, int(len(fetched) * 0.99))]}


def _run_queue_s() -> float:
    """Seconds this process's threads have waited runnable for a CPU (``/proc/PID/task/*/schedstat``, field 2):
    on a loaded machine, how much of the trailing lag is the scheduler's rather than the tail's."""
    total = 0
    for task in Path("/proc/self/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile, or no schedstat on this kernel
    return total / 1e9


# -- the parent: lab, producers, children ------------------------------------------------------------

def run_child(mode: str, bootstrap: str, amount: float, *, pin: str | None = None) -> dict[str, Any]:
    command = [sys.executable, __file__, mode, bootstrap, str(amount)]
    if pin is not None:
        command = ["taskset", "-c", pin, *command]
    out = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def log_records(bootstrap: str) -> int:
    """Records in the topic now (end minus start offsets over its partitions)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(TOPIC, p) for p in consumer.partitions_for_topic(TOPIC) or ()]
        starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        return sum(ends[tp] - starts[tp] for tp in tps)
    finally:
        consumer.close()


def start_producers(bootstrap: str, count: int, log_dir: Path, kafka_version: str, *, tag: str,
                    duration_ms: int) -> list[Any]:
    """``count`` Java TV2 producers, each committing a transaction every ``duration_ms`` at most, unthrottled."""
    from txnwatch.lab.java_clients import JavaProducerSpec, start_java_producer

    return [start_java_producer(bootstrap, JavaProducerSpec(
        transactional_id=f"bench-{tag}-{i:03d}", topic=f"bench-{tag}-{i % 4}", transaction_duration_ms=duration_ms,
        records_per_second=1_000_000, duration_s=None, record_size_bytes=20,
        extra_props={"linger.ms": "0"}), log_dir, kafka_version=kafka_version)
        for i in range(count)]


def stop_producers(producers: Sequence[Any]) -> None:
    for producer in producers:
        producer.stop()


def fill(bootstrap: str, target: int, producers: int, log_dir: Path, kafka_version: str,
         timeout_s: float = 900.0) -> tuple[int, float]:
    """Java TV2 producers until the log holds ``target`` records; (records, seconds taken)."""
    from txnwatch.lab.topics import create_topic
    from txnwatch.lab.wire import admin_client

    admin = admin_client(bootstrap)
    try:
        for i in range(4):
            create_topic(admin, f"bench-fill-{i}", partitions=4, replication=1)
            create_topic(admin, f"bench-trail-{i}", partitions=4, replication=1)
    finally:
        admin.close()
    started = time.perf_counter()
    running = start_producers(bootstrap, producers, log_dir, kafka_version, tag="fill", duration_ms=1)
    try:
        have = 0
        while time.perf_counter() - started < timeout_s:
            time.sleep(2.0)
            try:
                have = log_records(bootstrap)
            except Exception:  # the topic appears with the first producer's InitProducerId
                continue
            if have >= target:
                break
            if not any(p.running() for p in running):
                raise RuntimeError(f"the Java producers exited:\n{running[0].output()[-2000:]}")
    finally:
        stop_producers(running)
    time.sleep(1.0)  # the stopped producers' last records
    return log_records(bootstrap), time.perf_counter() - started


def python_walk() -> None:
    """This child's tail without the compiled batch walk (kafka/_txnlog_walk.c): the Python walk, for a side by side."""
    from txnwatch.kafka import txnlog_batches

    txnlog_batches.WALK = None


def main(argv: list[str]) -> int:
    mode, bootstrap, amount = argv[1], argv[2], float(argv[3])
    if os.environ.get("TXNLOG_BENCH_PYTHON_WALK"):  # benchmarks/txnlog_replay.py --python-walk
        python_walk()
    if mode == "floor":
        out: dict[str, Any] = floor(bootstrap, int(amount))
    elif mode == "tail":
        out = tail(bootstrap, int(amount))
    elif mode == "tail-python":  # the same tail without the compiled batch walk (kafka/_txnlog_walk.c)
        python_walk()
        out = tail(bootstrap, int(amount))
    elif mode == "trail":
        out = trail(bootstrap, amount)
    elif mode == "trail-topic":
        out = trail(bootstrap, amount, argv[4])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps({**out, "pid": os.getpid()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
