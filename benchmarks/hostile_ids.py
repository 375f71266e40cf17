"""One tenant's 32,767-byte ids on PostgreSQL: is every other tenant's history still recorded, and at what cost?

Issue 23 item 1.  The recorder writes the same polls twice side by side on a fresh PostgreSQL: once with only
ordinary tenants, once with one more tenant whose transactional id and group id are 32,767 bytes (Kafka's own
limit) and one whose ids hold a NUL character (which PostgreSQL text refuses: set aside and counted).  Printed:
rows recorded per poll for the ordinary tenants and for the hostile ones, the rows the store refused, and the
write's wall and CPU time per poll, with the machine's load.

    .venv/bin/python benchmarks/hostile_ids.py [--polls 20] [--ids 2000] [--groups 200]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "service")]

from sqlalchemy import func, select  # noqa: E402

from tests.fixtures.postgres_server import start_postgres  # noqa: E402
from txnwatch.core.model import (  # noqa: E402
    ClusterSnapshot,
    GroupLag,
    PartitionSnapshot,
    TopicPartition,
    TransactionDescription,
    TxnState,
)
from txnwatch.detect import Findings  # noqa: E402
from txnwatch.store import models as m  # noqa: E402
from txnwatch.store.db import make_engine, make_sessionmaker  # noqa: E402
from txnwatch.store.migrate import upgrade  # noqa: E402
from txnwatch.store.recorder import Recorder  # noqa: E402

TP = TopicPartition("orders", 0)
LONG_TXN = "txn-" + "é" * 16_381 + "x"  # 32,767 bytes of UTF-8
LONG_GROUP = "group-" + "é" * 16_380 + "x"
NUL = "tenant\x00evil"
T0 = 1_700_000_000_000


def _poll(i: int, ids: list[str], groups: list[str]) -> tuple[ClusterSnapshot, Findings]:
    at = T0 + i * 5_000
    # every id changes state each poll, so every row is written (the worst case for the store)
    state = (TxnState.ONGOING, TxnState.COMPLETE_COMMIT)[i % 2]
    snapshot = ClusterSnapshot(
        cluster="c", taken_at_ms=at, duration_ms=5,
        transactions={t: TransactionDescription(t, 1, state, 1_000 + n, i, 60_000, at - 1_000, frozenset({TP}))
                      for n, t in enumerate(ids)},
        partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=10, last_stable_offset=5, log_start_offset=0)})
    return snapshot, Findings(cluster="c", now_ms=at, lags=tuple(GroupLag("c", g, TP, 3, 7, 2, 1.0) for g in groups))


def run(url: str, polls: int, ordinary_ids: list[str], ordinary_groups: list[str], hostile: list[str]) -> None:
    upgrade(url)
    engine = make_engine(url)
    recorder = Recorder(make_sessionmaker(engine), {"c": "h:9092"})
    recorder.start()
    ids, groups = ordinary_ids + hostile, ordinary_groups + hostile
    wall = cpu = 0.0
    for i in range(polls):
        snapshot, findings = _poll(i, ids, groups)
        t, c = time.perf_counter(), time.process_time()
        recorder.on_poll("c", snapshot, findings, None, snapshot.taken_at_ms)
        wall, cpu = wall + time.perf_counter() - t, cpu + time.process_time() - c
        if recorder.buffered:
            print(f"  poll {i}: NOT written ({recorder.health.error})")
    L, S = m.ConsumerLagSample, m.TransactionState
    with make_sessionmaker(engine)() as s:
        ordinary_lag = s.scalar(select(func.count()).select_from(L).where(L.group_id.in_(ordinary_groups))) or 0
        hostile_lag = s.scalar(select(func.count()).select_from(L).where(L.group_id.not_in(ordinary_groups))) or 0
        stored = set(s.scalars(select(S.transactional_id)))
        polls_written = s.scalar(select(func.count()).select_from(m.Poll)) or 0
    engine.dispose()
    label = ("+ 32,767-byte ids and a NUL id" if NUL in hostile else "+ 32,767-byte ids" if hostile
             else "ordinary tenants only")
    print(f"  {label}: polls written {polls_written}/{polls}; lag rows/poll: ordinary {ordinary_lag / polls:.0f} "
          f"(of {len(ordinary_groups)}), hostile {hostile_lag / polls:.0f} (of {len(hostile)}); ids stored: "
          f"ordinary {len(stored & set(ordinary_ids))}/{len(ordinary_ids)}, 32,767-byte "
          f"{'yes' if LONG_TXN in stored else 'no'}, NUL {'yes' if NUL in stored else 'no (refused)'}; "
          f"refused {dict(recorder.health.rejected_objects) or 0}; "
          f"write per poll {wall / polls * 1000:.1f} ms wall, {cpu / polls * 1000:.1f} ms CPU")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--ids", type=int, default=2_000)
    parser.add_argument("--groups", type=int, default=200)
    args = parser.parse_args()
    server = start_postgres()
    try:
        ids = [f"app-{n:05d}" for n in range(args.ids)]
        groups = [f"group-{n:04d}" for n in range(args.groups)]
        print(f"PostgreSQL, {args.polls} polls of {args.ids} transactional ids and {args.groups} groups; "
              f"load average before {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
        run(server.create_database("plain"), args.polls, ids, groups, [])
        run(server.create_database("long"), args.polls, ids, groups, [LONG_TXN, LONG_GROUP])
        run(server.create_database("hostile"), args.polls, ids, groups, [LONG_TXN, LONG_GROUP, NUL])
        print(f"load average after {os.getloadavg()[0]:.2f}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
