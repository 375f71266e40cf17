"""Issue 25, CPU: what one poll's store write costs the polls' thread, on the peers lab's shape.

Builds ``--polls`` polls 15 s apart of a synthetic cluster (benchmarks/scale.py's broker answers through the
real parsers and detection: 2,009 partitions, 12,015 group partitions by default, every partition moving, so
every poll writes its whole offset picture as the peers lab's ``steady`` workload makes it), then times the
recorder's write of each (``Recorder.flush``: one transaction into a fresh SQLite file) in thread CPU
seconds.  Polls are split into those that write the offset picture only and those that also write the lag
sample (one per ``--lag-sample-interval``, 300 s by default, as the daemon).

``--baseline REF`` measures the store of another commit in the same run (its ``service/`` from ``git
archive``; the benchmarks stay this checkout's), alternating the two ``--rounds`` times in fresh
subprocesses so that load from elsewhere drifts into both alike.  Quote the load average beside the figures.

    .venv/bin/python benchmarks/poll_store.py                        # this checkout
    .venv/bin/python benchmarks/poll_store.py --baseline main        # this checkout against main, A/B
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 15


def measure(partitions: int, group_partitions: int, ids: int, polls: int, lag_s: float) -> dict[str, Any]:
    """Per-poll thread CPU of Recorder.flush, in ms, split by what the poll wrote."""
    sys.path.insert(0, str(ROOT))
    from benchmarks import scale
    from txnwatch import detect
    from txnwatch.core.views import LatestState
    from txnwatch.store import models as m
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.lag_sampling import LagSampling
    from txnwatch.store.migrate import upgrade
    from txnwatch.store.offset_pictures import OffsetPictures
    from txnwatch.store.recorder import Recorder

    directory = tempfile.mkdtemp(prefix="poll-store-")
    try:
        url = f"sqlite:///{directory}/bench.db"
        upgrade(url)
        engine = make_engine(url)
        recorder = Recorder(make_sessionmaker(engine), {"bench": "bench:9092"},
                            lag_sampling=LagSampling(default_s=lag_s), offset_pictures=OffsetPictures(default_s=300))
        recorder.start()
        state, detector = LatestState(["bench"]), detect.INITIAL
        start = (int(time.time() * 1000) - polls * POLL_S * 1000 - 3_600_000) // 300_000 * 300_000
        records = []
        for k in range(polls):
            at = start + k * POLL_S * 1000
            detector, _ = scale.poll(state, detector, scale.answers(at, partitions, group_partitions, ids), at)
            view = state.get("bench")
            assert view is not None  # published by scale.poll
            records.append(recorder.build("bench", view.snapshot, view.findings, None, at))
        lag = m.table(m.ConsumerLagSample)
        picture_ms: list[float] = []
        with_lag_ms: list[float] = []
        for record in records:
            lagged = any(table is lag and rows for table, rows in record.inserts)
            recorder.enqueue(record)
            cpu = time.thread_time()
            assert recorder.flush(), recorder.health.error
            spent = (time.thread_time() - cpu) * 1000
            assert record.offsets_written
            (with_lag_ms if lagged else picture_ms).append(spent)
        engine.dispose()
        return {"picture_ms": picture_ms, "with_lag_ms": with_lag_ms,
                "recorder": sys.modules[Recorder.__module__].__file__}
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _service_of(ref: str, into: Path) -> Path:
    """``ref``'s service/ tree and its migrations, unpacked under ``into``."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "service", "alembic", "alembic.ini"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "service"


def _child(service: Path, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, __file__, "--service", str(service), "--polls", str(args.polls),
               "--partitions", str(args.partitions), "--group-partitions", str(args.group_partitions),
               "--ids", str(args.ids), "--lag-sample-interval", str(args.lag_sample_interval)]
    env = dict(os.environ, TXNWATCH_ALEMBIC_DIR=str(service.parent))
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    measured = dict(json.loads(out.splitlines()[-1]))
    if not Path(measured["recorder"]).resolve().is_relative_to(service.resolve()):
        raise SystemExit(f"the child measured {measured['recorder']}, not the store under {service}")
    return measured


def _line(name: str, runs: list[dict[str, Any]]) -> tuple[float, float]:
    picture = statistics.median(v for r in runs for v in r["picture_ms"])
    lagged = [v for r in runs for v in r["with_lag_ms"]]
    with_lag = statistics.median(lagged) if lagged else float("nan")
    print(f"  {name:<16} picture-only polls: median {picture:6.1f} ms CPU ({sum(len(r['picture_ms']) for r in runs)} "
          f"polls); with the lag sample: median {with_lag:6.1f} ms CPU ({len(lagged)} polls)")
    return picture, with_lag


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=2_009)
    parser.add_argument("--group-partitions", type=int, default=12_015)
    parser.add_argument("--ids", type=int, default=30)
    parser.add_argument("--polls", type=int, default=40, help="15 s apart; 40 span two 300 s windows exactly")
    parser.add_argument("--lag-sample-interval", type=float, default=300)
    parser.add_argument("--baseline", metavar="REF", help="also measure this commit's store, alternating")
    parser.add_argument("--rounds", type=int, default=3, help="subprocess runs per side with --baseline")
    # --service, not another name: benchmarks/scale.py puts the service it names first on sys.path as it loads
    parser.add_argument("--service", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.service:
        sys.path.insert(0, args.service)
        print(json.dumps(measure(args.partitions, args.group_partitions, args.ids, args.polls,
                                 args.lag_sample_interval)))
        return 0
    print(f"{args.partitions:,} partitions, {args.group_partitions:,} group partitions, {args.ids} ids, every "
          f"partition moving; {args.polls} polls {POLL_S} s apart, lag sample every {args.lag_sample_interval:g} s; "
          f"load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="poll-store-ref-") as tmp:
        sides = {"this checkout": ROOT / "service"}
        if args.baseline:
            sides[args.baseline] = _service_of(args.baseline, Path(tmp))
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        for _ in range(args.rounds if args.baseline else 1):
            for name, service in sides.items():
                runs[name].append(_child(service, args))
        print(f"Recorder.flush, thread CPU per poll (load {os.getloadavg()[0]:.1f} at the end):")
        figures = {name: _line(name, r) for name, r in runs.items()}
    if args.baseline:
        (mine_p, mine_l), (base_p, base_l) = figures["this checkout"], figures[args.baseline]
        print(f"  ratio this/{args.baseline}: picture-only {mine_p / base_p:.2f}, with the lag sample "
              f"{mine_l / base_l:.2f}; at 4 polls/min and one lag sample per 5 min: "
              f"{(mine_p * 3.8 + mine_l * 0.2) / 1000:.3f} vs "
              f"{(base_p * 3.8 + base_l * 0.2) / 1000:.3f} CPU-s/min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
