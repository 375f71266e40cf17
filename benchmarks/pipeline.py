"""Pipeline throughput: synthetic history rows per second on local[2], 1M vs 10M rows.

Prints the time of each size, rows/s and the 10M/1M ratio (linear scaling is 10.0;
below that, fixed costs dominate at 1M).  One Spark session serves both sizes and a
warm-up run, so JVM start and JIT do not flatter or punish either.  Bounded: each
run is abandoned (and reported) after --limit seconds.

    .venv/bin/python benchmarks/pipeline.py [--sizes 1000000,10000000] [--days 7] [--limit 600]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import threading
import time
from datetime import date, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from pyspark.sql import SparkSession

from txnwatch.pipeline.progress import Progress
from txnwatch.pipeline.run import Window, run_pipeline
from txnwatch.pipeline.session import build_session
from txnwatch.pipeline.synth import synthesize


def _timed_run(spark: SparkSession, archive: str, window: Window, limit: float, verbose: bool) -> float | None:
    """Run once; None when it overran ``limit`` (the jobs are cancelled)."""
    result: dict[str, float] = {}

    def work() -> None:
        start = time.perf_counter()
        run_pipeline(spark, archive, window, progress=Progress(quiet=not verbose))
        result["seconds"] = time.perf_counter() - start

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        spark.sparkContext.cancelAllJobs()
        worker.join(30)
        return None
    return result.get("seconds")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000")
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--limit", type=float, default=600.0, help="seconds allowed per run")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    today = date.today()
    window = Window(today - timedelta(days=args.days - 1), today)
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-"))
    try:
        spark = build_session(args.master, "txnwatch-bench", {"spark.driver.memory": "4g"})
        warm = str(work / "warm")
        synthesize(warm, 50_000, args.days, 2, today)
        _timed_run(spark, warm, window, args.limit, False)
        times: dict[int, float | None] = {}
        for n in sizes:
            archive = str(work / f"rows-{n}")
            start = time.perf_counter()
            synthesize(archive, n, args.days, 2, today)
            made = time.perf_counter() - start
            seconds = _timed_run(spark, archive, window, args.limit, args.verbose)
            times[n] = seconds
            shown = "over the limit" if seconds is None else f"{seconds:7.1f} s  {n / seconds:12,.0f} rows/s"
            print(f"{n:>12,} rows: synth {made:5.1f} s, pipeline {shown}", flush=True)
            shutil.rmtree(archive, ignore_errors=True)
        spark.stop()
        if len(sizes) == 2 and all(times.values()):
            small, large = sizes
            ratio = times[large] / times[small]  # type: ignore[operator]  # both timings exist by then
            print(f"time ratio {large:,}/{small:,} rows: {ratio:.2f} (linear = {large / small:.1f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
