"""Trailing a 10,000 transactions/s coordinator log: a REPLAY of real coordinator records, read by the daemon's tail.

Why a replay.  Issue 25 asks the tail to trail a 10,000 transaction/s producer by <= 2 s p99 on
one core.  On a 2-core machine six of Kafka's Java TV2 producers reach ~707 transactions/s, and clients may not
write to ``__transaction_state`` themselves.  So:

1. **capture**: a one-broker lab (Kafka 4.1.1 unless ``--kafka-version``) has its real
   ``__transaction_state`` filled by Kafka's own Java TV2 producers (benchmarks/txnlog.py's ``fill``);
   its records are read back as the coordinator wrote them (key and value bytes);
2. **rewrite**: ``--ids`` transactional ids take turns at ``--rate`` distinct transactions/s, each
   transaction the captured TV2 sequence (Ongoing, PrepareCommit with the epoch bumped,
   CompleteCommit; each id starts with the captured Empty of its InitProducerId).  In the captured
   value bytes only the id (the key), the producer id, the epoch and the two times are patched,
   consistently per id (one producer id, the epoch rising by one per transaction as TV2's does,
   times on the replay's schedule); everything else, the topic partitions and tagged fields
   included, is the coordinator's own bytes;
3. **write**: every record becomes its own v2 record batch (as the coordinator writes them),
   built before the run with kafka-python's ``DefaultRecordBatchBuilder``, into an ordinary topic
   of 50 partitions (``__transaction_state``'s default) with ``message.timestamp.type=LogAppendTime``,
   so each record's timestamp is the broker's append time.  Records of one id stay on one
   partition.  Produce (v9, acks=1, one batch per partition per request as Produce v3+ requires)
   requests are encoded before the run and written on a raw socket on their schedule by a
   sender pinned to CPU 1;
4. **read**: the daemon's own ``ClusterTail`` over ``TransactionLogTail`` (fetch, decode, apply,
   SQLite store), pointed at that topic through ``TransactionLogTail``'s ``topic`` argument (a
   constructor argument, no user setting), pinned to CPU 0 (``taskset -c 0``), from the topic's
   end (benchmarks/txnlog.py's ``trail`` child).  Per record: broker append time -> end of the database
   transaction that stored it.

Printed: the rate the sender reached (records/s and transactions/s), trailing p50/p99/max, the
tail's CPU seconds and share of its core, records behind at the end, how long its threads waited
runnable for a CPU (``/proc/self/task/*/schedstat``: on a loaded machine most of the lag is that),
and the load average.  Kafka 4.1.1's TV2 coordinator writes three records per transaction (no
Empty between transactions), so 10,000 transactions/s is 30,000 records/s; ``--rate 13334`` gives
the 40,000 records/s of four records per transaction.

    .venv/bin/python benchmarks/txnlog_replay.py                  # 10,000 txn/s for 20 s, 1,000 ids
    .venv/bin/python benchmarks/txnlog_replay.py --rate 5000 --seconds 30 --ids 5000
    .venv/bin/python benchmarks/txnlog_replay.py --bootstrap HOST:PORT   # a running lab (filled log)
    .venv/bin/python benchmarks/txnlog_replay.py --rate 13334             # 40,000 records/s
    .venv/bin/python benchmarks/txnlog_replay.py --busy-commit-ms 1000    # one commit a second, as before
    .venv/bin/python benchmarks/txnlog_replay.py --no-compiled            # the tail without its compiled modules
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness, txnlog

TOPIC = "txnlog-replay"
PARTITIONS = 50
PER_TXN = 3  # TV2: Ongoing (added by the partition leader), PrepareCommit, CompleteCommit


@dataclass(frozen=True)
class Template:
    """One captured record: its value bytes and where in them the rewritten fields lie."""

    value: bytes
    times_at: int  # last update ms, start ms (int64 each)
    last_delta_ms: int  # last update - the transaction's start, as captured


def capture(bootstrap: str) -> tuple[Template, list[tuple[Template, Template, Template]]]:
    """The captured Empty, and every complete TV2 transaction (Ongoing, PrepareCommit, CompleteCommit) of the
    real log, in log order."""
    from kafka import KafkaConsumer, TopicPartition

    from txnwatch.core.model import TxnLogRecord, TxnState
    from txnwatch.kafka.txnlog import decode_record

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    tps = [TopicPartition("__transaction_state", p) for p in consumer.partitions_for_topic("__transaction_state")]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    ends = consumer.end_offsets(tps)
    by_id: dict[str, list[tuple[TxnLogRecord, bytes]]] = {}
    while any(consumer.position(tp) < ends[tp] for tp in tps):
        for tp, records in consumer.poll(1000).items():
            for r in records:
                d = decode_record(r.key, r.value, tp.partition, r.offset, r.timestamp)
                if isinstance(d, TxnLogRecord) and r.value is not None and d.value_version == 1:
                    by_id.setdefault(d.transactional_id, []).append((d, r.value))
    consumer.close()

    def template(d: TxnLogRecord, value: bytes, start_ms: int) -> Template:
        raw_start = d.start_ms if d.start_ms is not None else -1
        at = value.rfind(struct.pack(">qq", d.last_update_ms, raw_start))
        assert at > 0, "times not found in the captured value"
        return Template(value, at, d.last_update_ms - start_ms)

    empty: Template | None = None
    txns: list[tuple[Template, Template, Template]] = []
    order = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)
    for records in by_id.values():
        for i, (d, value) in enumerate(records):
            if d.state is TxnState.EMPTY and empty is None:
                empty = template(d, value, d.last_update_ms)
            window = records[i:i + 3]
            if (len(window) == 3 and tuple(x.state for x, _ in window) == order
                    and window[1][0].producer_epoch == d.producer_epoch + 1 and d.start_ms is not None):
                txns.append(tuple(template(x, v, d.start_ms) for x, v in window))  # type: ignore[arg-type]  # three
    assert empty is not None and txns, "the captured log holds no complete TV2 transaction"
    return empty, txns


def rewritten(t: Template, pid: int, epoch: int, start_ms: int, empty: bool = False) -> bytes:
    raw = bytearray(t.value)
    struct.pack_into(">qh", raw, 2, pid, epoch)
    struct.pack_into(">qq", raw, t.times_at, start_ms + t.last_delta_ms, -1 if empty else start_ms)
    return bytes(raw)


def key_of(tid: str) -> bytes:
    raw = tid.encode()
    return struct.pack(">hh", 0, len(raw)) + raw


def schedule(empty: Template, txns: list[tuple[Template, Template, Template]], ids: int, rate: int,
             seconds: float, start_ms: int) -> list[tuple[float, int, bytes, bytes]]:
    """(due s after the start, partition, key, value) of every record: the ids' Empty records first, then
    ``rate`` transactions/s, the ids taking turns."""
    out: list[tuple[float, int, bytes, bytes]] = []
    keys = [key_of(f"replay-{i:06d}") for i in range(ids)]
    warm = ids / (rate * PER_TXN)  # the Empty records go out at the same record rate
    for i in range(ids):
        out.append((i / (rate * PER_TXN), i % PARTITIONS,
                    keys[i], rewritten(empty, 10_000 + i, 0, start_ms, empty=True)))
    for n in range(int(rate * seconds)):
        i, turn = n % ids, n // ids
        due = warm + n / rate
        at_ms = start_ms + int(due * 1000)
        ongoing, prepare, complete = txns[n % len(txns)]
        out.append((due, i % PARTITIONS, keys[i], rewritten(ongoing, 10_000 + i, turn, at_ms)))
        out.append((due, i % PARTITIONS, keys[i], rewritten(prepare, 10_000 + i, turn + 1, at_ms)))
        out.append((due, i % PARTITIONS, keys[i], rewritten(complete, 10_000 + i, turn + 1, at_ms)))
    return out


def requests(records: list[tuple[float, int, bytes, bytes]], per_request_s: float) -> list[tuple[float, bytes]]:
    """Framed Produce v9 requests (acks=1), each with one single-record batch per partition: (due s, bytes)."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.default_records import DefaultRecordBatchBuilder

    Topic = ProduceRequest.TopicProduceData
    Partition = Topic.PartitionProduceData
    out: list[tuple[float, bytes]] = []
    pending: dict[int, list[tuple[bytes, bytes]]] = {}
    due_first = 0.0
    correlation = 0

    def flush() -> None:
        nonlocal correlation
        if not pending:
            return
        parts = []
        # Produce v3+ takes exactly one batch per partition: the partition's first pending record goes now, the
        # rest wait for the next request (all are due within per_request_s).
        for p in sorted(pending):
            key, value = pending[p].pop(0)
            builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                                producer_epoch=-1, base_sequence=-1, batch_size=1 << 16)
            builder.append(0, timestamp=None, key=key, value=value, headers=[])
            parts.append(Partition(index=p, records=bytes(builder.build())))
        for p in [p for p, left in pending.items() if not left]:
            del pending[p]
        correlation += 1
        request = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30_000,
                                 topic_data=[Topic(name=TOPIC, partition_data=parts)])
        request.with_header(correlation_id=correlation, client_id="txnlog-replay")
        out.append((due_first, bytes(request.encode(version=9, framed=True, header=True))))

    for due, partition, key, value in records:
        if pending and due - due_first >= per_request_s:
            while pending:
                flush()
        if not pending:
            due_first = due
        pending.setdefault(partition, []).append((key, value))
    while pending:
        flush()
    return out


class Sender:
    """Writes the encoded requests on their schedule to the topic's leader; reads and checks the answers."""

    def __init__(self, host: str, port: int, built: list[tuple[float, bytes]]) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.built = built
        self.answered = 0
        self.errors: dict[int, int] = {}
        self.late_s: list[float] = []

    def _read(self) -> None:
        from kafka.protocol.producer import ProduceResponse

        buf = b""
        while self.answered < len(self.built):
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
                size = struct.unpack_from(">i", buf)[0]
                frame, buf = buf[4:4 + size], buf[4 + size:]
                response = ProduceResponse.decode(frame, version=9, header=True)
                for topic in response.responses:
                    for p in topic.partition_responses:
                        if p.error_code:
                            self.errors[p.error_code] = self.errors.get(p.error_code, 0) + 1
                self.answered += 1

    def run(self, started: float) -> float:
        reader = threading.Thread(target=self._read, daemon=True)
        reader.start()
        for due, data in self.built:
            wait = started + due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            else:
                self.late_s.append(-wait)
            self.sock.sendall(data)
        sent = time.perf_counter()
        reader.join(60)
        return sent - started


def produce_child(bootstrap: str, spec_path: str) -> None:
    """The sender, in its own process (pinned by the parent): builds everything first, then says ready and waits
    for the start time the parent writes on stdin."""
    from txnwatch.lab.wire import admin_client, partition_leaders

    spec = json.loads(Path(spec_path).read_text())
    empty, txns = capture(bootstrap)
    build0 = time.process_time()
    records = schedule(empty, txns, spec["ids"], spec["rate"], spec["seconds"], int(time.time() * 1000) + 60_000)
    built = requests(records, 0.002)
    gc.freeze()
    admin = admin_client(bootstrap)
    leaders = set(partition_leaders(admin, TOPIC).values())
    host, port = next((b.host, b.port) for b in admin._manager.cluster.brokers() if b.node_id in leaders)
    admin.close()
    sender = Sender(host, port, built)
    print(json.dumps({"ready": True, "records": len(records), "requests": len(built),
                      "seconds_planned": records[-1][0],
                      "transactions": int(spec["rate"] * spec["seconds"]), "captured_txns": len(txns),
                      "build_cpu_s": time.process_time() - build0}), flush=True)
    sys.stdin.readline()
    cpu0 = time.process_time()
    took = sender.run(time.perf_counter())
    late = sorted(sender.late_s) or [0.0]
    print(json.dumps({"sent_s": took, "answered": sender.answered, "errors": sender.errors,
                      "late_p99_s": late[int(len(late) * 0.99)], "late_max_s": late[-1],
                      "cpu_s": time.process_time() - cpu0}), flush=True)


def run(args: argparse.Namespace, bootstrap: str) -> None:
    from kafka.errors import TopicAlreadyExistsError

    from txnwatch.lab.topics import create_topic
    from txnwatch.lab.wire import admin_client

    admin = admin_client(bootstrap)
    try:
        create_topic(admin, TOPIC, partitions=PARTITIONS, replication=1,
                     configs={"message.timestamp.type": "LogAppendTime"})
    except TopicAlreadyExistsError:
        pass  # a second run on the same lab: the tail starts at its end
    finally:
        admin.close()
    spec = Path(tempfile.mkdtemp(prefix="txnwatch-bench-replay-")) / "spec.json"
    spec.write_text(json.dumps({"ids": args.ids, "rate": args.rate, "seconds": args.seconds}))
    loads = harness.Loads()
    producer = subprocess.Popen(["taskset", "-c", "1", sys.executable, __file__, "--produce-child", bootstrap,
                                 str(spec)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    tail = None
    try:
        assert producer.stdout is not None and producer.stdin is not None
        ready = json.loads(producer.stdout.readline())
        print(f"== REPLAY of real coordinator records ({ready['captured_txns']:,} captured TV2 transactions) into "
              f"{TOPIC} ({PARTITIONS} partitions, LogAppendTime): {args.rate:,} transactions/s = "
              f"{args.rate * PER_TXN:,} records/s for {args.seconds:.0f} s over {args.ids:,} ids; {ready['records']:,} "
              f"records in {ready['requests']:,} Produce requests, built in {ready['build_cpu_s']:.1f} CPU-s first")
        env = {**os.environ, **({"TXNWATCH_BENCH_BUSY_COMMIT_MS": str(args.busy_commit_ms)} if args.busy_commit_ms
                                else {}), **({"TXNWATCH_BENCH_NO_COMPILED": "1"} if args.no_compiled else {})}
        tail = subprocess.Popen(["taskset", "-c", "0", sys.executable, txnlog.__file__, "--child", "trail", bootstrap,
                                 str(ready["seconds_planned"] + args.drain_seconds), TOPIC],
                                stdout=subprocess.PIPE, text=True, env=env)
        assert tail.stdout is not None
        assert json.loads(tail.stdout.readline()).get("ready")  # its consumer is at the topic's end
        loads.sample()
        producer.stdin.write("go\n")
        producer.stdin.flush()
        sent = json.loads(producer.stdout.readline())
        loads.sample()
        out, _ = tail.communicate(timeout=args.drain_seconds + 120)
        trailed = json.loads(out.strip().splitlines()[-1])
        loads.sample()
    finally:
        for proc in (producer, tail):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    records_s = ready["records"] / sent["sent_s"]
    print(f"   sender (CPU 1): {records_s:,.0f} records/s (~{records_s / PER_TXN:,.0f} transactions/s, the ids' Empty "
          f"records first); {sent['answered']:,}/{ready['requests']:,} answered, errors {sent['errors'] or 'none'}; "
          f"behind schedule p99 {sent['late_p99_s'] * 1000:.0f} ms, max {sent['late_max_s'] * 1000:.0f} ms")
    if trailed.get("stored"):
        print(f"   tail (CPU 0{', no compiled modules' if args.no_compiled else ''}): append-to-stored p50 "
              f"{trailed['p50']:.2f} s, p99 {trailed['p99']:.2f} s, max {trailed['max']:.2f} s over "
              f"{trailed['stored']:,} records (goal p99 <= 2 s at 10,000 transactions/s); CPU {trailed['cpu_s']:.1f} s "
              f"({trailed['cpu_s'] / sent['sent_s']:.0%} of its core over the writing); behind at the end "
              f"{trailed['behind_at_end']:,}; waited runnable {trailed['run_queue_s']:.1f} thread-s")
        print(f"   append-to-read (the fetch's share) p50 {trailed['fetched_p50']:.2f} s, p99 "
              f"{trailed['fetched_p99']:.2f} s; {trailed['commits']:,} commits; CPU-s by thread: "
              + ", ".join(f"{name} {cpu:.1f}" for name, cpu in sorted(trailed["threads"].items(), key=lambda kv: -kv[1])
                          if cpu >= 0.05))
    else:
        print(f"   nothing stored: {trailed}")
    print("   " + harness.machine_line(loads))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=10_000, help="transactions per second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--ids", type=int, default=1_000, help="transactional ids taking turns")
    parser.add_argument("--drain-seconds", type=float, default=15.0, help="the tail keeps reading this long after")
    parser.add_argument("--records", type=int, default=30_000, help="fill the lab's log to this many records first")
    parser.add_argument("--kafka-version", default="4.1.1")
    parser.add_argument("--bootstrap", help="a running lab (its log filled to --records if it holds fewer)")
    parser.add_argument("--busy-commit-ms", type=int, help="the tail's transaction_log.busy_commit_ms (default: the "
                        "daemon's); 1000 commits once a second")
    parser.add_argument("--no-compiled", action="store_true", help="the tail without its compiled modules")
    parser.add_argument("--produce-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce_child:
        produce_child(*args.produce_child)
        return
    with harness.Lab(args.bootstrap, kafka_version=args.kafka_version) as lab:
        have, took = txnlog.fill(lab.bootstrap, args.records, 4, Path(tempfile.mkdtemp()), args.kafka_version)
        print(f"== captured log: {have:,} records (filled by 4 Java TV2 producers in {took:.0f} s)")
        run(args, lab.bootstrap)


if __name__ == "__main__":
    main()
