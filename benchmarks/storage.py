"""Issue 25: storage per day, measured, as a function of partitions, group partitions and transactional ids.

Replays ``--polls`` polls 15 s apart of a synthetic cluster (benchmarks/scale.py's broker answers through the
real parsers, detection and recorder) into a fresh SQLite file, then exports that history to a Parquet
archive as the hourly job does (``store.archive.export_history``, no settle time), and prints per table:
rows per poll, bytes per row in SQLite (used pages of the table and its indexes, from ``dbstat``) and in
the archive, and the rows and bytes a day of 15 s polls adds at the sampling the run used.  Two cases:

* ``idle``: nothing is produced and every group has read up to the HWM (the issue's lab when quiet);
* ``moving``: every partition's HWM moves between every two polls (the worst case for partition offsets,
  which are written when they changed: store/offset_pictures.py).

Lag rows are written once per ``lag_sample_interval_seconds`` for the groups the caps keep
(``max_group_partitions``, 5,000 by default), whatever moves.  Figures feed docs/performance.md
("Storage per day"); nothing is asserted.

    .venv/bin/python benchmarks/storage.py                                   # the issue's lab, both cases
    .venv/bin/python benchmarks/storage.py --partitions 20000 --group-partitions 50000 --ids 10000
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from benchmarks import scale  # the broker answers and the poll of benchmarks/scale.py

DAY_S = 86_400
POLL_S = scale.POLL_INTERVAL_S
TABLES = {"polls": "polls", "partition_offsets": "offsets", "lag_samples": "lag", "txn_ids": None}


def _sqlite_bytes(path: str) -> dict[str, tuple[int, int]]:
    """Rows and used bytes (table + its indexes) per table."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        pages = dict(db.execute("SELECT name, sum(pgsize - unused) FROM dbstat GROUP BY name"))
        owners = dict(db.execute("SELECT name, tbl_name FROM sqlite_schema WHERE type IN ('table', 'index')"))
        used: dict[str, int] = {}
        for name, size in pages.items():
            table = owners.get(name, name)
            used[table] = used.get(table, 0) + size
        return {t: (db.execute(f"SELECT count(*) FROM {t}").fetchone()[0], used.get(t, 0))  # our names
                for t in TABLES}


def _archive_bytes(root: Path) -> dict[str, int]:
    return {name: sum(f.stat().st_size for f in (root / name).rglob("*.parquet")) if (root / name).exists() else 0
            for name in {v for v in TABLES.values() if v}}


def run(partitions: int, group_partitions: int, ids: int, polls: int, idle: bool, lag_s: float,
        offsets_s: float) -> dict[str, Any]:
    from txnwatch import detect
    from txnwatch.core.views import LatestState
    from txnwatch.store import recorder as rec
    from txnwatch.store.archive import export_history
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.lag_sampling import LagSampling
    from txnwatch.store.migrate import upgrade
    from txnwatch.store.offset_pictures import OffsetPictures

    directory = tempfile.mkdtemp(prefix="storage-")
    try:
        url = f"sqlite:///{directory}/bench.db"
        upgrade(url)
        engine = make_engine(url)
        recorder = rec.Recorder(make_sessionmaker(engine), {"bench": "bench:9092"},
                                lag_sampling=LagSampling(default_s=lag_s),
                                offset_pictures=OffsetPictures(default_s=offsets_s))
        recorder.start()
        state, detector = LatestState(["bench"]), detect.INITIAL
        window = int(max(lag_s, offsets_s, 1) * 1000)
        start = (int(time.time() * 1000) - polls * POLL_S * 1000 - 3_600_000) // window * window  # aligned
        cpu = time.process_time()
        for k in range(polls):
            at = start + k * POLL_S * 1000
            replies = scale.answers(at, partitions, group_partitions, ids, idle)
            detector, _ = scale.poll(state, detector, replies, at)
            view = state.get("bench")
            assert view is not None  # published by scale.poll
            recorder.on_poll("bench", view.snapshot, view.findings, None, at)
        cpu = time.process_time() - cpu
        with engine.connect() as conn:
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        export_history(engine, f"{directory}/archive", settle=timedelta(0))
        engine.dispose()
        return {"sqlite": _sqlite_bytes(f"{directory}/bench.db"), "archive": _archive_bytes(Path(directory, "archive")),
                "cpu_s": cpu}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2_009)
    parser.add_argument("--group-partitions", type=int, default=12_006)
    parser.add_argument("--ids", type=int, default=30)
    parser.add_argument("--polls", type=int, default=40, help="15 s apart; 40 span two 300 s windows exactly")
    parser.add_argument("--lag-sample-interval", type=float, default=300)
    parser.add_argument("--offset-sample-interval", type=float, default=300)
    parser.add_argument("--cases", default="idle,moving")
    parser.add_argument("--downsample-after-hours", type=float, default=1)
    parser.add_argument("--downsample-minutes", type=float, default=60)
    args = parser.parse_args()
    span_s = args.polls * POLL_S
    print(f"{args.partitions:,} partitions, {args.group_partitions:,} group partitions, {args.ids:,} ids; "
          f"{args.polls} polls {POLL_S} s apart; lag_sample_interval_seconds {args.lag_sample_interval:g}, "
          f"offset_sample_interval_seconds {args.offset_sample_interval:g}; load {os.getloadavg()[0]:.1f}")
    for case in args.cases.split(","):
        out = run(args.partitions, args.group_partitions, args.ids, args.polls, case == "idle",
                  args.lag_sample_interval, args.offset_sample_interval)
        print(f"\n{case}: CPU {out['cpu_s']:.1f} s for {args.polls} polls (parse, detect, store)")
        print(f"  {'table':<18} {'rows/poll':>10} {'B/row SQLite':>13} {'B/row archive':>14} "
              f"{'rows/day':>12} {'MB/day SQLite':>14} {'MB/day archive':>15}")
        total_db = total_ar = 0.0
        for table, archived in TABLES.items():
            rows, used = out["sqlite"][table]
            per_row = used / rows if rows else 0.0
            ar = out["archive"].get(archived, 0) if archived else 0
            ar_row = ar / rows if rows and archived else 0.0
            per_day = rows * DAY_S / span_s if table != "txn_ids" else rows
            mb_db, mb_ar = per_day * per_row / 1e6, per_day * ar_row / 1e6
            if table == "txn_ids":  # one row per id, updated in place: a size, not a growth
                print(f"  {table:<18} {'-':>10} {per_row:>13.0f} {'-':>14} {rows:>12,} "
                      f"{used / 1e6:>11.2f} MB held, not per day")
                continue
            total_db, total_ar = total_db + mb_db, total_ar + mb_ar
            print(f"  {table:<18} {rows / args.polls:>10,.1f} {per_row:>13.0f} {ar_row:>14.1f} {per_day:>12,.0f} "
                  f"{mb_db:>14.1f} {mb_ar:>15.1f}")
        print(f"  {'total':<18} {'':>10} {'':>13} {'':>14} {'':>12} {total_db:>14.1f} {total_ar:>15.1f}")
        # What stays per day once retention.downsample_* has thinned samples older than an hour (store/downsample.py):
        # one offset row per partition per window (plus the first sample of each pinned LSO, none here) and one
        # lag sample per window, at the bytes per row measured above.
        windows = DAY_S / (args.downsample_minutes * 60)
        kept = {"polls": out["sqlite"]["polls"][0] * DAY_S / span_s,
                "partition_offsets": args.partitions // scale.PER_TOPIC * scale.PER_TOPIC * windows,
                "lag_samples": out["sqlite"]["lag_samples"][0] / max(1, round(span_s / args.lag_sample_interval))
                * windows}
        stays = sum(rows * out["sqlite"][t][1] / max(1, out["sqlite"][t][0]) for t, rows in kept.items()) / 1e6
        hot = total_db * args.downsample_after_hours / 24
        print(f"  after downsampling ({args.downsample_minutes:g} min windows after {args.downsample_after_hours:g} h): "
              f"{stays:.1f} MB per day kept, plus {hot:.1f}-{2 * hot:.1f} MB held for the last "
              f"{args.downsample_after_hours:g}-{args.downsample_after_hours + 1:g} h (the job runs hourly)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
