"""Cost of one /metrics scrape at production scale: 5k partitions, 10k transactional ids, 500 groups.

/metrics is built from the in-memory state of the latest poll, so no Kafka is needed:
two polls' snapshots are synthesised (200 open transactions, 20 of them hanging, on
5,000 partitions; 500 groups with 10 committed offsets each), run through the real
detection, published as the collector publishes them, and the registry is rendered
with prometheus-client as the endpoint does.  Prints the median and worst render
time, the exposition size and series count, and the time through the HTTP endpoint.
Prometheus' default scrape timeout is 10 s; the figures are printed, never asserted.

    .venv/bin/python benchmarks/scrape.py [--partitions 5000] [--ids 10000] [--groups 500] [--repeat 20]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from prometheus_client import generate_latest  # noqa: E402

from txnwatch import detect  # noqa: E402
from txnwatch.metrics import build_registry  # noqa: E402
from txnwatch.model import (ClusterSnapshot, GroupSnapshot, ListedTransaction, PartitionSnapshot,  # noqa: E402
                            ProducerState, TopicPartition, TransactionDescription, TxnState)
from txnwatch.state import LatestState  # noqa: E402

CLUSTER = "bench"
TOPICS = 5
OPEN, HANGING = 200, 20


def snapshot(at_ms: int, partitions: int, ids: int, groups: int) -> ClusterSnapshot:
    per_topic = partitions // TOPICS
    tps = [TopicPartition(f"topic-{t}", p) for t in range(TOPICS) for p in range(per_topic)]
    txns, listed, open_on = {}, [], {}
    for i in range(ids):
        txn_id = f"app-{i % 40:02d}-task-{i:05d}"
        is_open = i < OPEN
        tp = tps[i * 7 % len(tps)]
        if is_open:
            open_on[tp] = 1_000 + i  # its producer id
        if is_open and i < HANGING:
            continue  # open on its partition, unknown to the coordinator: hanging
        state = TxnState.ONGOING if is_open else (TxnState.COMPLETE_COMMIT if i % 3 else TxnState.EMPTY)
        txns[txn_id] = TransactionDescription(txn_id, i % 3, state, 1_000 + i, 0, 60_000,
                                              at_ms - 120_000 if is_open else None,
                                              frozenset({tp}) if is_open else frozenset())
        listed.append(ListedTransaction(txn_id, 1_000 + i, state, i % 3))
    parts = {}
    for n, tp in enumerate(tps):
        hwm = 10_000 + n + at_ms // 1000 % 1000
        producer = open_on.get(tp)
        producers = () if producer is None else (ProducerState(producer, 0, 5, at_ms - 3_600_000, 0, 9_000),)
        parts[tp] = PartitionSnapshot(tp, leader=n % 3, high_watermark=hwm,
                                      last_stable_offset=9_000 if producer else hwm, log_start_offset=0,
                                      producers=producers)
    group_snaps = {f"group-{g:03d}": GroupSnapshot(f"group-{g:03d}", "Stable", "consumer", {
        tps[(g * 10 + k) % len(tps)]: 8_500 for k in range(10)}) for g in range(groups)}
    return ClusterSnapshot(cluster=CLUSTER, taken_at_ms=at_ms, duration_ms=600, listed=tuple(listed),
                           transactions=txns, partitions=parts, groups=group_snaps,
                           max_transaction_timeout_ms=900_000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=5000)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--groups", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()

    state = LatestState([CLUSTER])
    detector, now = detect.INITIAL, int(time.time() * 1000)
    t = time.perf_counter()
    for at in (now - 15_000, now):  # two polls: transitions, LSO tracks and lag history have a past
        snap = snapshot(at, args.partitions, args.ids, args.groups)
        detector, findings = detect.evaluate(detector, snap, at)
        state.update(CLUSTER, up=True, polls=2, last_poll_at_ms=at, last_success_at_ms=at, last_poll_duration_ms=600,
                     snapshot=snap, findings=findings)
    print(f"state of {args.partitions} partitions, {args.ids} ids, {args.groups} groups built and detected in "
          f"{time.perf_counter() - t:.1f} s ({len(findings.hanging)} hanging, {len(findings.lags)} lag rows)")

    registry = build_registry(state, lambda: True)
    body = generate_latest(registry)  # warm-up
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        body = generate_latest(registry)
        times.append((time.perf_counter() - start) * 1000)
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    print(f"render: median {statistics.median(times):.0f} ms, max {max(times):.0f} ms over {args.repeat} scrapes; "
          f"{series:,} series, {len(body) / 1e6:.1f} MB")

    from fastapi.testclient import TestClient

    from txnwatch.api.app import create_app
    from txnwatch.config import Settings
    from txnwatch.wiring import build_runtime

    runtime = build_runtime(Settings(database_url="sqlite://", clusters=[{"name": CLUSTER,
                                                                          "bootstrap_servers": ["127.0.0.1:9"]}]),
                            collect=False)
    runtime = dataclasses.replace(runtime, state=state, registry=registry)
    with TestClient(create_app(runtime, manage_lifecycle=False)) as client:
        client.get("/metrics")
        http = []
        for _ in range(max(3, args.repeat // 4)):
            start = time.perf_counter()
            assert client.get("/metrics").status_code == 200
            http.append((time.perf_counter() - start) * 1000)
    print(f"GET /metrics: median {statistics.median(http):.0f} ms (Prometheus' default scrape timeout: 10 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
