"""Cost of one cluster poll: txnwatch's batched, concurrent poll vs. the obvious sequential one.

The baseline asks the same questions with kafka-python's ``KafkaAdminClient``
(list_transactions, describe_transactions, describe_producers, list_partition_offsets
for high watermark and LSO, list_groups, list_group_offsets), which awaits one request
at a time.  Both are measured against the same lab cluster with open transactions,
optionally behind added network latency, and the ratios are printed.

    python benchmarks/poll.py                    # starts a lab cluster
    python benchmarks/poll.py --latency-ms 10    # one-way latency through the lab proxy
    python benchmarks/poll.py --bootstrap host:9092 --transactions 20 --partitions 12
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer.offsets import IsolationLevel, OffsetSpec
from kafka.structs import TopicPartition

from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings


def naive_poll(admin: KafkaAdminClient, topic: str, partitions: int) -> None:
    admin.describe_topics([topic])
    listings = admin.list_transactions()
    ids = {t.transactional_id for rows in listings.values() for t in rows}
    if ids:
        admin.describe_transactions(ids)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    admin.describe_producers(tps)
    admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps})
    admin.list_partition_offsets({tp: OffsetSpec.LATEST for tp in tps}, isolation_level=IsolationLevel.READ_COMMITTED)
    groups = [g["group_id"] for g in admin.list_groups()]
    if groups:
        admin.list_group_offsets({g: None for g in groups})


def count_sends(admin: KafkaAdminClient) -> Callable[[], int]:
    """The admin client awaits each request before the next: its sends are its round trips."""
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


def timed(call: Callable[[], Any], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", help="use this cluster instead of starting a lab")
    parser.add_argument("--transactions", type=int, default=30, help="open transactions (one producer each)")
    parser.add_argument("--partitions", type=int, default=24)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="lab only: one-way latency per broker")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    lab = None
    if args.bootstrap:
        bootstrap = args.bootstrap
    else:
        from txnwatch.lab.cluster import start_lab

        lab = start_lab(lab_dir=tempfile.mkdtemp(prefix="txnwatch-bench-"), die_with_parent=True, quiet=True)
        bootstrap = lab.bootstrap_servers
    producers: list[KafkaProducer] = []
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        admin.create_topics([NewTopic(topic, args.partitions, min(3, len(admin.describe_cluster()["brokers"])))])
        time.sleep(1)
        for i in range(args.transactions):
            p = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"bench-{uuid.uuid4().hex[:8]}",
                              transaction_timeout_ms=15_000)
            p.init_transactions()
            p.begin_transaction()
            p.send(topic, b"x", partition=i % args.partitions)
            p.flush()
            producers.append(p)
        if lab is not None and args.latency_ms and lab.proxy is not None:
            lab.proxy.delay(None, args.latency_ms)

        settings = ClusterConnectionSettings(name="bench", bootstrap_servers=tuple(bootstrap.split(",")),
                                             topics_include=(topic,))
        with ClusterConnection(settings) as connection:
            connection.poll()
            ours_ms = timed(connection.poll, args.repeat)
            ours_trips = connection.last_poll_round_trips
            snapshot = connection.poll()
        sends = count_sends(admin)
        naive_poll(admin, topic, args.partitions)
        sends()
        naive_ms = timed(lambda: naive_poll(admin, topic, args.partitions), args.repeat)
        naive_trips = sends() // args.repeat
        admin.close()

        print(f"cluster: {len(snapshot.brokers)} brokers, {len(snapshot.listed)} transactional ids, "
              f"{len(snapshot.partitions)} partitions, latency {args.latency_ms} ms one way")
        print(f"round trips per poll: txnwatch {ours_trips}, sequential {naive_trips}, "
              f"ratio {naive_trips / ours_trips:.1f}x")
        print(f"median poll time:     txnwatch {ours_ms:.1f} ms, sequential {naive_ms:.1f} ms, "
              f"ratio {naive_ms / ours_ms:.1f}x")
    finally:
        for p in producers:
            p.close(timeout=1)
        if lab is not None:
            lab.down()


if __name__ == "__main__":
    main()
