"""Consumer groups at scale: series, /metrics bytes, lag rows and database growth per poll, before and after the caps.

Issue 23, item 5: 2,000 offset-only consumer groups added ~31k series and 0.32 MB of lag rows
per poll; 5,000 would fill the chart's 1 GiB SQLite volume in ~6 h.  This script builds that
fixture on a real one-broker lab and measures what txnwatch does with it:

* a topic of ``--partitions`` partitions with ``--records`` records each, and ``--groups``
  offset-only groups (OffsetCommit with generation -1, as tools and Kafka Connect sinks leave
  them), each on ``--offsets-per-group`` partitions at committed offsets spread so lags differ;
* ``--polls`` real polls of the lab with txnwatch's own ``ClusterConnection``;
* the same snapshots replayed, side by side, through detection, the /metrics render and the
  recorder on a fresh SQLite file, one variant per row:

  - ``uncapped, every poll``: no caps, lag rows every poll (txnwatch before item 5);
  - ``caps, every poll``: the default caps (max_groups 500, max_group_partitions 5,000) alone;
  - ``caps, 300 s``: the defaults (caps and lag_sample_interval_seconds 300);

  polls are spaced ``--interval`` seconds apart on the snapshots' clock (taken_at shifted;
  everything else as polled), so the lag-sample windows fall as they would in the daemon.

Printed per variant: series on /metrics and its text bytes, lag rows and all rows per poll,
SQLite bytes per poll (used pages, WAL checkpointed), the projection per day and the days a
1 GiB volume lasts, CPU seconds beside wall time, and the machine's load.  Nothing is asserted.

    python benchmarks/groups.py                     # 5,000 groups, 40 polls, ~3 min on 2 cores
    python benchmarks/groups.py --groups 2000 --polls 20
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
GIB = 1 << 30
DAY_S = 86_400


def _poll_module() -> Any:
    """benchmarks/poll.py's raw-protocol fixture tools (batched FindCoordinator, OffsetCommit on many connections)."""
    spec = importlib.util.spec_from_file_location("bench_poll", HERE / "poll.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_poll"] = module
    spec.loader.exec_module(module)
    return module


def make_topic(bootstrap: str, topic: str, partitions: int, records: int) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="bench-groups", request_timeout_ms=60_000)
    admin.create_topics([NewTopic(topic, partitions, 1)], timeout_ms=60_000)
    admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=1 << 16)
    for p in range(partitions):
        for _ in range(records):
            producer.send(topic, b"x" * 100, partition=p)
    producer.flush(timeout=120)
    producer.close()


async def commit_groups(bootstrap: str, topic: str, partitions: int, records: int, groups: list[str],
                        per_group: int, connections: int) -> float:
    from kafka.protocol.consumer import OffsetCommitRequest

    bench = _poll_module()
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    first = bench.RawConnection(host, int(port))
    await first.open()
    coordinator = await bench.find_coordinators(first, groups, 0)
    first.close()
    from kafka.protocol.metadata import MetadataRequest

    meta_conn = bench.RawConnection(host, int(port))
    await meta_conn.open()
    meta = await meta_conn.call(MetadataRequest(topics=None), 1)
    meta_conn.close()
    brokers = {b[0]: (b[1], b[2]) for b in meta.brokers}
    pool = bench.Pool(brokers, connections)
    topic_cls = OffsetCommitRequest.OffsetCommitRequestTopic
    part_cls = topic_cls.OffsetCommitRequestPartition

    def job(index: int, gid: str) -> Any:
        parts = [(index * per_group + k) % partitions for k in range(per_group)]
        committed = (index * 37) % (records + 1)  # lags from 0 to the whole partition, spread over the groups

        def check(response: Any) -> bool:
            return all(bench._ok(p.error_code) for t in response.topics for p in t.partitions)
        return bench.Job(coordinator[gid], lambda: (OffsetCommitRequest(
            group_id=gid, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=[topic_cls(name=topic, partitions=[part_cls(partition_index=p, committed_offset=committed,
                                                               committed_leader_epoch=-1, committed_metadata="")
                                                      for p in parts])]), 8), check)

    return float(await pool.run((job(i, g) for i, g in enumerate(groups)), "OffsetCommit"))


@dataclass
class Variant:
    name: str
    max_groups: int
    max_group_partitions: int
    lag_interval_s: float


@dataclass
class Figures:
    series: int
    metrics_bytes: int
    lag_rows_per_poll: float
    rows_per_poll: float
    db_bytes_per_poll: float
    omitted_groups: int
    wall_s: float
    cpu_s: float


def _used_bytes(path: Path) -> int:
    """Bytes the database's pages hold (WAL checkpointed first; free pages left out)."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page_size, pages, free = (con.execute(f"PRAGMA {p}").fetchone()[0]
                                  for p in ("page_size", "page_count", "freelist_count"))
        return int(page_size * (pages - free))
    finally:
        con.close()


def _rows(path: Path) -> dict[str, int]:
    con = sqlite3.connect(path)
    try:
        names = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        con.close()


def replay(snapshots: list[Any], variant: Variant, interval_s: float, workdir: Path) -> Figures:
    from txnwatch import detect
    from txnwatch.core.views import ClusterView, LatestState
    from txnwatch.metrics.lag import LagMetricOptions
    from txnwatch.metrics.registry import build_registry
    from txnwatch.metrics.render import render_text
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.lag_sampling import LagSampling
    from txnwatch.store.migrate import upgrade
    from txnwatch.store.recorder import Recorder

    path = workdir / f"{variant.name.replace(' ', '-').replace(',', '')}.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    recorder = Recorder(make_sessionmaker(engine), {"lab": "lab:9092"},
                        lag_sampling=LagSampling({"lab": variant.lag_interval_s}))
    recorder.start()
    settings = detect.DetectionSettings(max_groups=variant.max_groups,
                                        max_group_partitions=variant.max_group_partitions)
    before_bytes, before_rows = _used_bytes(path), _rows(path)
    state, findings, last = detect.INITIAL, None, None
    t0 = 1_800_000_000_000 - 1_800_000_000_000 % 300_000  # window-aligned, as any clock is eventually
    wall, cpu = time.monotonic(), time.process_time()
    for k, snap in enumerate(snapshots):
        at = t0 + round(k * interval_s * 1000)
        snap = replace(snap, taken_at_ms=at)
        state, findings = detect.evaluate(state, snap, at, settings)
        recorder.on_poll("lab", snap, findings, None, at)
        last = snap
    wall, cpu = time.monotonic() - wall, time.process_time() - cpu
    engine.dispose()
    after_rows = _rows(path)
    grown = {t: after_rows[t] - before_rows.get(t, 0) for t in after_rows}
    polls = len(snapshots)
    view = LatestState(["lab"])
    view.publish(ClusterView(name="lab", up=True, snapshot=last, findings=findings))
    text = render_text(build_registry(view, lambda: True, LagMetricOptions()))
    series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
    assert findings is not None
    return Figures(series=series, metrics_bytes=len(text), lag_rows_per_poll=grown.get("lag_samples", 0) / polls,
                   rows_per_poll=sum(grown.values()) / polls,
                   db_bytes_per_poll=(_used_bytes(path) - before_bytes) / polls,
                   omitted_groups=findings.omitted.get(("consumer_group", "cap"), 0), wall_s=wall, cpu_s=cpu)


def report(args: argparse.Namespace, rows: list[tuple[Variant, Figures]], loads: list[float], poll_s: list[float]) -> None:
    print()
    print(f"{args.groups} offset-only groups x {args.offsets_per_group} partition(s), topic of {args.partitions} "
          f"partitions; {args.polls} real polls (median {sorted(poll_s)[len(poll_s) // 2]:.2f} s) replayed "
          f"{args.interval:g} s apart; load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} cores")
    head = (f"{'variant':<24} {'series':>8} {'/metrics':>10} {'lag rows':>9} {'rows':>8} {'DB bytes':>10} "
            f"{'MB/day':>8} {'1 GiB in':>10} {'omitted':>8} {'wall s':>7} {'CPU s':>6}")
    print(head)
    print("-" * len(head))
    base = rows[0][1]
    for variant, f in rows:
        per_day = f.db_bytes_per_poll * DAY_S / args.interval
        lasts = f"{GIB / per_day:.1f} d" if per_day > 0 else "-"
        print(f"{variant.name:<24} {f.series:>8,} {f.metrics_bytes / 1e6:>8.2f}MB {f.lag_rows_per_poll:>9.1f} "
              f"{f.rows_per_poll:>8.1f} {f.db_bytes_per_poll:>10,.0f} {per_day / 1e6:>8.1f} {lasts:>10} "
              f"{f.omitted_groups:>8,} {f.wall_s:>7.1f} {f.cpu_s:>6.1f}")
    for variant, f in rows[1:]:
        print(f"  {variant.name} vs {rows[0][0].name}: series x{f.series / base.series:.3f}, /metrics bytes "
              f"x{f.metrics_bytes / base.metrics_bytes:.3f}, DB bytes per poll "
              f"x{f.db_bytes_per_poll / max(base.db_bytes_per_poll, 1):.3f}")
    print("DB bytes: used SQLite pages grown over the run divided by the polls (partition samples, polls, "
          "transaction state and lag rows); MB/day at one poll per interval.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, default=5_000)
    parser.add_argument("--offsets-per-group", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=3, help="of the topic (3: ~16 series a group, as in the issue)")
    parser.add_argument("--records", type=int, default=200, help="records per partition")
    parser.add_argument("--polls", type=int, default=40)
    parser.add_argument("--interval", type=float, default=15.0, help="poll interval the replay spaces polls by")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--max-seconds", type=int, default=900)
    args = parser.parse_args()

    def on_alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"benchmark exceeded --max-seconds {args.max_seconds}")

    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.max_seconds)
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LabSettings

    run = uuid.uuid4().hex[:6]
    lab_dir = Path(tempfile.mkdtemp(prefix="txnwatch-bench-groups-"))
    workdir = Path(tempfile.mkdtemp(prefix="txnwatch-bench-groups-db-"))
    loads = [os.getloadavg()[0]]
    t0 = time.monotonic()
    lab = start_lab(LabSettings(brokers=1, proxy=False), lab_dir / "lab", die_with_parent=True, quiet=True)
    try:
        bootstrap = lab.bootstrap_servers
        print(f"lab up in {time.monotonic() - t0:.0f} s: {bootstrap}")
        topic = f"bench-groups-{run}"
        make_topic(bootstrap, topic, args.partitions, args.records)
        groups = [f"bench-{run}-group-{i:05d}" for i in range(args.groups)]
        asyncio.run(commit_groups(bootstrap, topic, args.partitions, args.records, groups, args.offsets_per_group,
                                  args.connections))
        settings = ClusterConnectionSettings(name="lab", bootstrap_servers=(bootstrap,), record_fetch_limit=0,
                                             topics_include=(topic,))
        snapshots, poll_s = [], []
        with ClusterConnection(settings) as connection:
            for _ in range(args.polls):
                started = time.monotonic()
                snapshots.append(connection.poll())
                poll_s.append(time.monotonic() - started)
        seen = len(snapshots[-1].groups)
        print(f"fixture ready at {time.monotonic() - t0:.0f} s; the last poll saw {seen} groups")
        loads.append(os.getloadavg()[0])
        unlimited = 10**9
        variants = [Variant("uncapped, every poll", unlimited, unlimited, 0),
                    Variant("caps, every poll", 500, 5_000, 0),
                    Variant("caps, 300 s (defaults)", 500, 5_000, 300)]
        rows = []
        for variant in variants:
            rows.append((variant, replay(snapshots, variant, args.interval, workdir)))
            loads.append(os.getloadavg()[0])
        report(args, rows, loads, poll_s)
        print(f"total run time {time.monotonic() - t0:.0f} s")
    finally:
        signal.alarm(0)
        lab.down()
        shutil.rmtree(lab_dir, ignore_errors=True)
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
