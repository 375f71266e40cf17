"""kafka-python's raw fetch, records/s, with the C ``crc32c`` package and with its pure-Python fallback.

kafka-python validates the CRC-32C of every fetched record batch (``check_crcs``), with the C
``crc32c`` package when it can import it and a pure-Python table loop otherwise (issue 25:
~28 % of the transaction-log tail's CPU).  This reads one topic from its beginning through a
``KafkaConsumer`` configured as the tail configures its own (no decode, no store: the client's
floor), once per implementation, in separate child processes, side by side, alternating, with
CPU seconds beside wall time and the machine's load.

    .venv/bin/python benchmarks/rawfetch.py                  # one-broker lab, 200,000 records, ~1 min
    .venv/bin/python benchmarks/rawfetch.py --records 50000 --runs 1
    .venv/bin/python benchmarks/rawfetch.py --bootstrap HOST:PORT --topic __transaction_state
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

# Run in a child process so that each implementation is chosen at kafka-python's import, as in the daemon.
READER = r"""
import json, sys, time
if sys.argv[1] == "python":
    sys.modules["crc32c"] = None  # what kafka-python sees when the package is not installed
from kafka import KafkaConsumer, TopicPartition
from kafka.record import util
bootstrap, topic, expected = sys.argv[2], sys.argv[3], int(sys.argv[4])
consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         auto_offset_reset="earliest", max_poll_records=10_000, fetch_max_bytes=16 * 1024 * 1024,
                         max_partition_fetch_bytes=4 * 1024 * 1024, check_crcs=True)
partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
consumer.assign(partitions)
consumer.seek_to_beginning(*partitions)
for tp in partitions:
    consumer.position(tp)
read, deadline = 0, time.monotonic() + 600
wall, cpu = time.perf_counter(), time.process_time()
while read < expected and time.monotonic() < deadline:
    read += sum(len(batch) for batch in consumer.poll(timeout_ms=500).values())
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
consumer.close()
print(json.dumps({"crc": util.calc_crc32c.__defaults__[0].__module__, "records": read, "wall_s": wall,
                  "cpu_s": cpu}))
"""


def produce(bootstrap: str, topic: str, records: int, value_bytes: int, partitions: int) -> None:
    from kafka import KafkaProducer

    from txnwatch.lab.topics import create_topic
    from txnwatch.lab.wire import admin_client

    admin = admin_client(bootstrap)
    try:
        create_topic(admin, topic, partitions=partitions, replication=1)
    finally:
        admin.close()
    # Values of the size of a TransactionLogValue naming a partition or two; keys like a transactional id.
    value = os.urandom(value_bytes)
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, acks=1)
    try:
        for i in range(records):
            producer.send(topic, key=b"txn-%06d" % (i % 5_000), value=value, partition=i % partitions)
        producer.flush(timeout=300)
    finally:
        producer.close(timeout=10)


def end_offsets(bootstrap: str, topic: str) -> int:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or ()]
        starts, ends = consumer.beginning_offsets(tps), consumer.end_offsets(tps)
        return sum(ends[tp] - starts[tp] for tp in tps)
    finally:
        consumer.close()


def read_once(mode: str, bootstrap: str, topic: str, expected: int) -> dict[str, float | str]:
    out = subprocess.run([sys.executable, "-c", READER, mode, bootstrap, topic, str(expected)],
                         check=True, capture_output=True, text=True)
    result: dict[str, float | str] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing cluster (default: start a one-broker lab here)")
    parser.add_argument("--topic", help="an existing topic to read (default: create and fill one)")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--value-bytes", type=int, default=90)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--runs", type=int, default=2, help="reads per implementation, alternating")
    args = parser.parse_args()
    lab = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        from txnwatch.lab.cluster import start_lab
        from txnwatch.lab.settings import LabSettings

        lab = start_lab(LabSettings(brokers=1), Path(tempfile.mkdtemp(prefix="txnwatch-rawfetch-")) / "lab",
                        die_with_parent=True, quiet=True)
        bootstrap = lab.bootstrap_servers
    try:
        topic = args.topic
        if topic is None:
            topic = f"rawfetch-{int(time.time())}"
            started = time.perf_counter()
            produce(bootstrap, topic, args.records, args.value_bytes, args.partitions)
            print(f"produced {args.records:,} records of {args.value_bytes} bytes to {topic} "
                  f"in {time.perf_counter() - started:.1f} s")
        expected = end_offsets(bootstrap, topic)
        print(f"reading {expected:,} records of {topic} through KafkaConsumer (check_crcs=True), "
              f"{args.runs} run(s) per implementation, alternating")
        results: dict[str, list[dict[str, float | str]]] = {"c": [], "python": []}
        loads = [os.getloadavg()[0]]
        for _ in range(args.runs):
            for mode in results:
                results[mode].append(read_once(mode, bootstrap, topic, expected))
                loads.append(os.getloadavg()[0])
    finally:
        if lab is not None:
            lab.down()
    print(f"{'crc32c':<30} {'records':>9} {'wall s':>7} {'CPU s':>6} {'records/s':>10} {'per CPU-s':>10}")
    best: dict[str, float] = {}
    for mode, runs in results.items():
        for r in runs:
            wall, cpu, n = float(r["wall_s"]), float(r["cpu_s"]), float(r["records"])
            label = f"{mode} ({r['crc']})"
            print(f"{label:<30} {n:>9,.0f} {wall:>7.2f} {cpu:>6.2f} {n / wall:>10,.0f} {n / cpu:>10,.0f}")
            best[mode] = max(best.get(mode, 0.0), n / wall)
    print(f"C / pure-Python, best records/s: {best['c'] / best['python']:.2f}x")
    print(f"load average (1 min) during the runs: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
