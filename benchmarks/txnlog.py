"""The transaction-log tail beside kafka-python's own floor on a lab's real log, and its decode + apply alone.

**Default**: a one-broker lab (Kafka 4.1.1 unless ``--kafka-version``; ``--bootstrap``: a running lab) whose
``__transaction_state`` Kafka's own Java TV2 producers fill to ``--records`` (ProducerPerformance, a transaction
per ms at most: Ongoing, PrepareCommit, CompleteCommit per transaction, one record per batch).  Then, each side
in a child process of its own (CPU seconds its own), ``--runs`` rounds alternating:

1. **floor**: a ``KafkaConsumer`` with the tail's fetch settings reading the whole log and touching nothing
   (kafka-python's fetch, CRC check and record objects: what any tail through kafka-python pays at least),
   pinned to CPU 1; its figures start with the consumer connected and positioned, the tail's with its opening, so
   the ratios are also printed with the floor's opening counted as the tail's;
2. **tail**: the daemon's ``ClusterTail`` over ``TransactionLogTail`` (fetch, decode, apply, SQLite) on the same
   log, pinned to CPU 1; again on CPUs 0,1 (its commit writer's SQLite work runs off the GIL on a second thread:
   the tail as the daemon runs it); and on one CPU without its compiled modules (``kafka/_txnlog_walk.c``,
   ``store/_stream_params.c``), as an install without a C compiler runs it;
3. decode + apply of generated TV2 records in this process, no client.

Printed: records, wall and CPU seconds, records/s and per CPU-s, CPU by thread, and the ratios to the floor
(goal >= 0.9x per CPU-s).  ``--synthetic`` prints decode + apply alone (goal >= 100,000 records/s on one core);
with ``--baseline REV`` REV's code and this checkout's run in turns (``--rounds``), each in a fresh process on
the same records, and the medians' ratio; ``--tagged`` gives every value PreviousProducerId (tag 0), as Kafka
4.3+ writes it.  Trailing a busy log: benchmarks/txnlog_replay.py, which runs this file's ``trail`` child.

    .venv/bin/python benchmarks/txnlog.py --records 300000 --runs 3   # ~5 min
    .venv/bin/python benchmarks/txnlog.py --records 30000 --runs 1    # a quick check
    .venv/bin/python benchmarks/txnlog.py --synthetic [--baseline REV --rounds 7] [--tagged]
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness

TOPIC = "__transaction_state"
RECORDS_PER_TXN = 4  # the synthetic stream: Ongoing, Ongoing (a second partition), PrepareCommit, CompleteCommit


# -- synthetic records: TransactionLogValue v1 as Kafka 4 writes it -------------------------------------------------


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_value(status: int, pid: int, epoch: int, partitions: dict[str, list[int]], last_ms: int, start_ms: int,
                 previous_pid: int | None = None) -> bytes:
    """TransactionLogValue v1 (flexible); with ``previous_pid`` its tag 0, as 4.3+ writes it; TV 2 (tag 2)."""
    body = struct.pack(">hqhib", 1, pid, epoch, 60_000, status) + _uvarint(len(partitions) + 1)
    for topic, ids in partitions.items():
        raw = topic.encode()
        body += _uvarint(len(raw) + 1) + raw + _uvarint(len(ids) + 1) + b"".join(struct.pack(">i", i) for i in ids)
        body += b"\x00"
    body += struct.pack(">qq", last_ms, start_ms)
    tags = b"\x02\x02" + struct.pack(">h", 2)
    return body + (b"\x01" + tags if previous_pid is None else b"\x02\x00\x08" + struct.pack(">q", previous_pid) + tags)


def tv2_stream(ids: int, transactions: int, tagged: bool = False) -> Iterator[tuple[bytes, bytes, int]]:
    """(key, value, log partition) of ``transactions`` TV2 transactions, the ids taking turns."""
    ongoing, prepare, complete = 1, 2, 4  # TransactionState ids as the coordinator persists them
    keys = [struct.pack(">hh", 0, len(f"bench-app-{i:06d}")) + f"bench-app-{i:06d}".encode() for i in range(ids)]
    epochs = [0] * ids
    for n in range(transactions):
        i, at = n % ids, 1_800_000_000_000 + n
        epoch = epochs[i]
        was = 1000 + i if tagged else None
        one, two = {"orders": [i % 12]}, {"orders": [i % 12], "payments": [i % 6]}
        for status, e, parts, dt in ((ongoing, epoch, one, 0), (ongoing, epoch, two, 1), (prepare, epoch + 1, two, 2),
                                     (complete, epoch + 1, {}, 3)):
            yield keys[i], encode_value(status, 1000 + i, e, parts, at + dt, at, previous_pid=was), i % 50
        epochs[i] = epoch + 1


def decode_apply(raw: Sequence[tuple[bytes, bytes, int]], batch: int = 10_000) -> dict[str, Any]:
    """Records decoded, applied and both per CPU-second, on this process's txnwatch."""
    from txnwatch.detect import txnlog as d
    from txnwatch.kafka.txnlog import decode_record

    gc.collect()
    t0 = time.process_time()
    records = [decode_record(key, value, part, offset, None) for offset, (key, value, part) in enumerate(raw)]
    t1 = time.process_time()
    state = d.TxnLogState()
    for i in range(0, len(records), batch):
        state, _ = d.apply(state, records[i:i + batch])  # type: ignore[arg-type]  # generated records all decode
    t2 = time.process_time()
    assert sum(s.commits for s in state.ids.values()) == len(raw) // RECORDS_PER_TXN
    return {"decode": len(raw) / (t1 - t0), "apply": len(raw) / (t2 - t1), "both": len(raw) / (t2 - t0),
            "cpu_s": t2 - t0, "code": d.__file__}


def synthetic(args: argparse.Namespace) -> None:
    transactions = 25_000 if args.quick else 100_000
    loads = harness.Loads()
    if not args.baseline:
        raw = list(tv2_stream(5_000, transactions, args.tagged))
        best = max((decode_apply(raw) for _ in range(3)), key=lambda r: r["both"])
        loads.sample()
        print(f"decode + apply on one core, {len(raw):,} records ({transactions:,} TV2 transactions, 5,000 ids); "
              f"{harness.machine_line(loads)}")
        print(f"  decode {best['decode']:,.0f}/s, apply {best['apply']:,.0f}/s, both {best['both']:,.0f} records/s = "
              f"{best['both'] / RECORDS_PER_TXN:,.0f} transactions/s (goal >= 100,000 records/s: "
              f"{best['both'] / 100_000:.2f}x)")
        return
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-txnlog-"))
    commit, tree = harness.baseline_tree(args.baseline, work)
    trees = {commit: tree, "this checkout": None}

    def run(side: str, n: int) -> dict[str, Any]:
        out = harness.child(__file__, "--child", "synthetic", transactions, int(args.tagged),
                            env=harness.baseline_env(trees[side]))
        print(f"  round {n + 1} {side:>14}: decode {out['decode']:,.0f}/s, apply {out['apply']:,.0f}/s, both "
              f"{out['both']:,.0f}/s, CPU {out['cpu_s']:.2f} s, load {loads.sample():.1f}", flush=True)
        return out

    figures = harness.alternate(list(trees), args.rounds, run)
    print(f"decode + apply, {commit} against this checkout, {transactions * RECORDS_PER_TXN:,} records a run"
          f"{' (tagged)' if args.tagged else ''}; {harness.machine_line(loads)}")
    for key in ("decode", "apply", "both"):
        before, after = (statistics.median(r[key] for r in figures[s]) for s in trees)
        print(f"  median {key:<6} {commit} {before:,.0f}/s, this checkout {after:,.0f}/s: {after / before:.3f}")


# -- the children: one side each, in a process of its own ----------------------------------------------------------


def _consumer(bootstrap: str) -> Any:
    """A consumer configured like ``TransactionLogTail``'s own (fetch sizes, max poll records)."""
    from kafka import KafkaConsumer

    from txnwatch.kafka import txnlog

    return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", **txnlog.FETCH_CONFIG)


def floor(bootstrap: str, expected: int) -> dict[str, Any]:
    """kafka-python alone: every record of the log from the beginning, nothing done with them."""
    from kafka import TopicPartition

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
    threads = harness.threads_cpu_s()
    consumer.close()
    return {"records": read, "wall_s": wall, "cpu_s": cpu, "threads": threads, "opening_wall_s": opening_wall,
            "opening_cpu_s": opening_cpu}


def without_compiled() -> None:
    """This child's tail as an install without a C compiler runs it: the batch walk and the stream rows'
    parameters in Python (the same records and rows)."""
    from txnwatch.kafka import txnlog_batches
    from txnwatch.store import txnlog as store_txnlog

    txnlog_batches.WALK, txnlog_batches.PLAIN_V2 = None, txnlog_batches.plain_v2
    store_txnlog.STREAM_PARAMS = None


class _Stamped:
    """The tail's log, keeping the append times of what was read and not yet stored (trail only)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.unstored: list[int] = []
        self.fetched: list[float] = []  # append -> read, seconds: the fetch's share of the lag

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


def _tail(bootstrap: str, *, from_beginning: bool, stamped: bool, topic: str = TOPIC) -> tuple[Any, Any, list[Any]]:
    """The daemon's ClusterTail over TransactionLogTail (as runtime/wiring.py builds it) on a scratch store."""
    from txnwatch.collect.txnlog_tail import ClusterTail
    from txnwatch.core.views import LatestState
    from txnwatch.kafka import ClusterConnectionSettings, TransactionLogTail, txnlog

    engine, sessions, _ = harness.scratch_store("txnwatch-bench-tail-", bootstrap="lab")
    connection = ClusterConnectionSettings(name="bench", bootstrap_servers=tuple(bootstrap.split(",")))
    opened: list[Any] = []

    def open_tail(positions: Mapping[int, int]) -> Any:
        tail: Any = TransactionLogTail(connection, positions=positions, from_beginning=from_beginning,
                                       max_poll_records=txnlog.FETCH_CONFIG["max_poll_records"], topic=topic)
        opened.append(_Stamped(tail) if stamped else tail)
        return opened[-1]

    class Timed(ClusterTail):
        """Stamps each commit as it lands: the k-th commit the writer finishes is the k-th handed off."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.handed: list[list[int]] = []
            self.landed: list[float] = []

        def _flush(self, now: float) -> bool:
            before, stamps = self._inflight, list(opened[-1].unstored) if stamped and opened else []
            stored = super()._flush(now)
            if stored and stamped and self._inflight is not None and self._inflight is not before:
                opened[-1].unstored.clear()
                self.handed.append(stamps)
            return stored

        def _write(self, *args: Any, **kwargs: Any) -> None:
            super()._write(*args, **kwargs)
            self.landed.append(time.time() * 1000)

    busy = os.environ.get("TXNWATCH_BENCH_BUSY_COMMIT_MS")  # transaction_log.busy_commit_ms (txnlog_replay.py)
    built = Timed("bench", bootstrap, open_tail, sessions, LatestState(["bench"]),
                  **({"commit_busy_s": int(busy) / 1000} if busy else {}))
    gc.freeze()  # the start-up objects, as the daemon leaves them after its start
    return engine, built, opened


def tail(bootstrap: str, expected: int) -> dict[str, Any]:
    """The daemon's tail from the beginning until every record up to the log's end is stored."""
    from sqlalchemy import text

    engine, cluster_tail, opened = _tail(bootstrap, from_beginning=True, stamped=False)
    wall, cpu = time.perf_counter(), time.process_time()
    while not opened:
        cluster_tail.step()
    ends, deadline, first = opened[-1].end_offsets(), time.monotonic() + 900, 0.0
    while time.monotonic() < deadline and not all(opened[-1].positions().get(p, 0) >= e for p, e in ends.items()):
        if cluster_tail.step() and not first:
            first = time.perf_counter()
    read = time.perf_counter()
    threads = harness.threads_cpu_s()  # before the stop ends the writer thread
    cluster_tail.close()  # commits what was applied, the commit in flight first, as the daemon stops
    done = time.perf_counter()
    wall, cpu = done - wall, time.process_time() - cpu
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT value FROM txnlog_counters WHERE name = 'records'")).scalar() or 0
    engine.dispose()
    # The floor's wall has neither the opening (stored positions, consumer, metadata) nor the last commit.
    return {"records": int(stored), "wall_s": wall, "cpu_s": cpu, "threads": threads,
            "to_first_s": first - (done - wall) if first else 0.0, "last_commit_s": done - read}


def trail(bootstrap: str, seconds: float, topic: str = TOPIC) -> dict[str, Any]:
    """The tail from the log's end for ``seconds`` while something writes: append-to-stored per record.  Says
    ``{"ready": true}`` once at the end, so that a replay may start writing."""
    engine, cluster_tail, opened = _tail(bootstrap, from_beginning=False, stamped=True, topic=topic)
    while not opened:
        cluster_tail.step()
    harness.reply({"ready": True})
    first = sum(opened[-1].positions().values())
    wall, cpu, waited = time.perf_counter(), time.process_time(), harness.run_queue_s()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cluster_tail.step() == 0:
            time.sleep(0.2)  # as TxnLogService does after an empty step
    wall, cpu, waited = time.perf_counter() - wall, time.process_time() - cpu, harness.run_queue_s() - waited
    behind = sum(max(0, e - opened[-1].positions().get(p, e)) for p, e in opened[-1].end_offsets().items())
    read = sum(opened[-1].positions().values()) - first
    threads = harness.threads_cpu_s()
    cluster_tail.close()
    engine.dispose()
    lags = sorted((done - at) / 1000 for stamps, done in zip(cluster_tail.handed, cluster_tail.landed, strict=False)
                  for at in stamps)
    fetched = sorted(x for t in opened for x in t.fetched)
    out = {"records": read, "wall_s": wall, "cpu_s": cpu, "behind_at_end": behind, "stored": len(lags),
           "run_queue_s": waited, "commits": len(cluster_tail.landed), "threads": threads}
    if lags:
        out.update(p50=harness.pct(lags, .5), p99=harness.pct(lags, .99), max=lags[-1],
                   fetched_p50=harness.pct(fetched, .5), fetched_p99=harness.pct(fetched, .99))
    return out


# -- filling the lab's log ------------------------------------------------------------------------------------------


def log_records(bootstrap: str, topic: str = TOPIC) -> int:
    """Records in the topic now (end minus start offsets over its partitions)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        return sum(ends[tp] - starts[tp] for tp in tps)
    finally:
        consumer.close()


def fill(bootstrap: str, target: int, producers: int, log_dir: Path, kafka_version: str) -> tuple[int, float]:
    """Kafka's Java TV2 producers, unthrottled, until the log holds ``target`` records; (records, seconds)."""
    from txnwatch.lab.java_clients import JavaProducerSpec, start_java_producer
    from txnwatch.lab.topics import create_topic
    from txnwatch.lab.wire import admin_client

    if log_records_or_zero(bootstrap) >= target:
        return log_records(bootstrap), 0.0
    admin = admin_client(bootstrap)
    try:
        for i in range(4):
            create_topic(admin, f"bench-fill-{i}", partitions=4, replication=1)
    finally:
        admin.close()
    started = time.perf_counter()
    running = [start_java_producer(bootstrap, JavaProducerSpec(
        transactional_id=f"bench-fill-{i:03d}", topic=f"bench-fill-{i % 4}", transaction_duration_ms=1,
        records_per_second=1_000_000, duration_s=None, record_size_bytes=20, extra_props={"linger.ms": "0"}),
        log_dir, kafka_version=kafka_version) for i in range(producers)]
    try:
        while time.perf_counter() - started < 900 and log_records_or_zero(bootstrap) < target:
            if not any(p.running() for p in running):
                raise RuntimeError(f"the Java producers exited:\n{running[0].output()[-2000:]}")
            time.sleep(2.0)
    finally:
        for producer in running:
            producer.stop()
    time.sleep(1.0)  # the stopped producers' last records
    return log_records(bootstrap), time.perf_counter() - started


def log_records_or_zero(bootstrap: str) -> int:
    try:
        return log_records(bootstrap)
    except Exception:  # the log appears with the first InitProducerId
        return 0


# -- the default: floor and tail on one lab -------------------------------------------------------------------------

SIDES = {"floor": ("floor", "1", "floor: kafka-python alone, 1 CPU"),
         "tail": ("tail", "1", "tail: fetch+decode+apply+store, 1 CPU"),
         "tail2": ("tail", "0,1", "tail, its writer thread free on CPUs 0,1"),
         "nocc": ("tail-nocc", "1", "tail without its compiled modules, 1 CPU")}


def lab_figures(args: argparse.Namespace) -> None:
    loads = harness.Loads()
    with harness.Lab(args.bootstrap, kafka_version=args.kafka_version) as lab:
        have, took = fill(lab.bootstrap, args.records, args.producers, Path(tempfile.mkdtemp()), args.kafka_version)
        print(f"{TOPIC}: {have:,} records (filled by {args.producers} Java TV2 producers in {took:.0f} s)", flush=True)
        print(f"{'':<44}" + "".join(f"{h:>10}" for h in ("records", "wall s", "CPU s", "records/s", "per CPU-s", "load")))

        def run(side: str, n: int) -> dict[str, Any]:
            mode, pin, what = SIDES[side]
            out = harness.child(__file__, "--child", mode, lab.bootstrap, have, pin=pin, timeout=1800)
            print(f"{what:<44}{out['records']:>10,}{out['wall_s']:>10.2f}{out['cpu_s']:>10.2f}"
                  f"{out['records'] / out['wall_s']:>10,.0f}{out['records'] / out['cpu_s']:>10,.0f}"
                  f"{loads.sample():>10.1f}", flush=True)
            threads = sorted(out["threads"].items(), key=lambda kv: -kv[1])[:4]
            print("    CPU s by thread (with start-up): " + ", ".join(f"{name} {c:.2f}" for name, c in threads))
            return out

        rows = harness.alternate(list(SIDES), args.runs, run)
    best = {s: max(r["records"] / r["wall_s"] for r in runs) for s, runs in rows.items()}
    per_cpu = {s: max(r["records"] / r["cpu_s"] for r in runs) for s, runs in rows.items()}
    floors = rows["floor"]
    opened_best = max(r["records"] / (r["wall_s"] + r["opening_wall_s"]) for r in floors)
    opened_cpu = max(r["records"] / (r["cpu_s"] + r["opening_cpu_s"]) for r in floors)
    print(harness.machine_line(loads) + f"; Kafka {lab.kafka_version}, one broker")
    for side, what in (("tail", "one CPU"), ("tail2", "two CPUs"), ("nocc", "no compiled modules, one CPU")):
        print(f"  tail ({what}) / floor: per CPU-s {harness.ratio(per_cpu[side], per_cpu['floor'])} "
              f"({harness.ratio(per_cpu[side], opened_cpu)} with the floor's opening), best records/s "
              f"{harness.ratio(best[side], best['floor'])} ({harness.ratio(best[side], opened_best)})   (goal >= 0.9x "
              f"per CPU-s)")
    print(f"  the compiled modules: {harness.ratio(per_cpu['tail'], per_cpu['nocc'])} the records per CPU-s without")
    synthetic_rates = decode_apply(list(tv2_stream(5_000, 25_000)))
    print(f"  decode + apply alone, 100,000 generated records, no client: {synthetic_rates['both']:,.0f} records/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=200_000, help="fill the log to this many records")
    parser.add_argument("--producers", type=int, default=4, help="Java producers filling the log")
    parser.add_argument("--runs", type=int, default=2, help="rounds of every side, alternating")
    parser.add_argument("--kafka-version", default="4.1.1")
    parser.add_argument("--bootstrap", help="a running lab (its log filled to --records if it holds fewer)")
    parser.add_argument("--synthetic", action="store_true", help="decode + apply alone, no lab")
    parser.add_argument("--quick", action="store_true", help="--synthetic: 100,000 records instead of 400,000")
    parser.add_argument("--baseline", metavar="REV", help="--synthetic: REV's code beside this checkout's")
    parser.add_argument("--rounds", type=int, default=7, help="--baseline: runs of each side")
    parser.add_argument("--tagged", action="store_true", help="--synthetic: values carry PreviousProducerId (4.3+)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, *rest = args.child
        if mode == "synthetic":
            harness.reply(decode_apply(list(tv2_stream(5_000, int(rest[0]), bool(int(rest[1]))))))
            return
        if mode == "tail-nocc":
            without_compiled()
        if mode == "floor":
            out = floor(rest[0], int(rest[1]))
        elif mode in ("tail", "tail-nocc"):
            out = tail(rest[0], int(rest[1]))
        else:  # trail BOOTSTRAP SECONDS [TOPIC]
            if os.environ.get("TXNWATCH_BENCH_NO_COMPILED"):
                without_compiled()
            out = trail(rest[0], float(rest[1]), *rest[2:3])
        harness.reply({**out, "pid": os.getpid()})
        return
    (synthetic if args.synthetic else lab_figures)(args)


if __name__ == "__main__":
    main()
