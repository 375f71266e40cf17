"""Issue 18 item 2: one poll's in-process cost on a big cluster, without Kafka.

Default scale: 100,000 partitions (2,000 topics of 50), 100,000 group partitions (2,000 groups
committing on 50 partitions each) and 50,000 transactional ids (500 open, 50 of them hanging).
Broker answers are synthesised as the attribute trees kafka-python's decoder yields and go through
the real parsers (txnwatch.kafka.parse: ListTransactions, DescribeTransactions, DescribeProducers,
ListOffsets x2, OffsetFetch), are assembled into a ClusterSnapshot, run through the real detection
(txnwatch.detect.evaluate) and published into LatestState, as the collector does.  Wire decoding and
network time are not in here (benchmarks/poll.py measures those on a real lab).

Each scale point runs in a fresh interpreter so its RSS is its own; the memory constant is the slope
of RSS over objects (partitions + group partitions + ids) between the points.  Figures are printed
next to the goals (poll <= 5 s, RSS <= 1 GB on 2 cores); nothing is asserted.

    .venv/bin/python benchmarks/scale.py                      # 25 %, 50 %, 100 % of the default scale
    .venv/bin/python benchmarks/scale.py --profile            # plus where a poll's time goes
    .venv/bin/python benchmarks/scale.py --partitions 20000 --group-partitions 20000 --ids 10000

Pay for change (issue 25): ``--idle`` keeps every offset where it was between polls (the issue's lab
when nothing is produced: groups caught up, HWMs still), ``--store`` adds the recorder's write of each
poll to a fresh SQLite file at the default sampling (lag rows and the partition-offset heartbeat every
300 s), and ``--baseline REV`` runs the largest scale point on REV's code (``git archive`` of its
``service/`` and ``alembic/``) and on this checkout's, ``--rounds`` times each in turns, each in a fresh
process, over ``--polls`` polls 15 s apart (21 by default there: the first, cold, is left out, the other
20 span one 300 s sampling window).  It prints CPU seconds per poll and per minute at 15 s polls beside
the wall time and the load, and the ratio of the medians (here / REV):

    .venv/bin/python benchmarks/scale.py --partitions 2009 --group-partitions 12000 --ids 30 \
        --fractions 1 --idle --store --baseline 7ae32d4

--profile uses pyinstrument when installed (``pip install pyinstrument``, an optional benchmark
tool: ``pip install -e '.[bench]'``), else the standard library's cProfile.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import harness

GOAL_POLL_S = 5.0
GOAL_RSS_MB = 1024
PER_TOPIC = 50
BROKERS = 3
POLL_INTERVAL_S = 15
SAMPLE_INTERVAL_S = 300  # the defaults of lag_sample_interval_seconds and offset_sample_interval_seconds


def answers(at_ms: int, partitions: int, group_partitions: int, ids: int, idle: bool = False) -> dict[str, Any]:
    """The brokers' answers of one poll, shaped as kafka-python decodes them.  ``idle``: nothing was produced
    since the last poll (HWMs where they were) and every group has read up to the HWM."""
    from txnwatch.core.vocabulary import TxnState

    topics = max(1, partitions // PER_TOPIC)
    names = [f"topic-{t:05d}" for t in range(topics)]
    open_ids = max(1, ids // 100)
    hanging = max(1, open_ids // 10)
    open_on: dict[tuple[str, int], int] = {}
    txn_rows, listed_rows = [], []
    for i in range(ids):
        txn_id = f"app-{i % 40:02d}-task-{i:06d}"
        tp = (names[i * 7 % topics], i % PER_TOPIC)
        is_open = i < open_ids
        if is_open:
            open_on[tp] = 1_000 + i
        state = (TxnState.ONGOING if is_open else TxnState.COMPLETE_COMMIT if i % 3 else TxnState.EMPTY).value
        if is_open and i < hanging:
            continue  # open on its partition, unknown to the coordinator: hanging
        listed_rows.append(NS(transactional_id=txn_id, producer_id=1_000 + i, transaction_state=state))
        txn_rows.append(NS(error_code=0, transactional_id=txn_id, transaction_state=state, transaction_timeout_ms=60_000,
                           transaction_start_time_ms=at_ms - 120_000 if is_open else -1, producer_id=1_000 + i,
                           producer_epoch=0, topics=[NS(topic=tp[0], partitions=[tp[1]])] if is_open else []))

    def producers(name: str, p: int) -> list[Any]:
        pid = open_on.get((name, p))
        return [] if pid is None else [NS(producer_id=pid, producer_epoch=0, last_sequence=5,
                                          last_timestamp=at_ms - 3_600_000, coordinator_epoch=0,
                                          current_txn_start_offset=9_000)]

    described = NS(topics=[NS(name=n, partitions=[NS(partition_index=p, error_code=0, error_message=None,
                                                    active_producers=producers(n, p)) for p in range(PER_TOPIC)])
                           for n in names])
    moved = 0 if idle else at_ms // 1000 % 1000
    hwm = NS(topics=[NS(name=n, partitions=[NS(partition_index=p, error_code=0, offset=10_000 + p + moved)
                                            for p in range(PER_TOPIC)]) for n in names])
    lso = NS(topics=[NS(name=n, partitions=[NS(partition_index=p, error_code=0,
                                               offset=9_000 if (n, p) in open_on else 10_000 + p + moved)
                                            for p in range(PER_TOPIC)]) for n in names])
    groups = max(1, group_partitions // PER_TOPIC)
    fetched = NS(groups=[NS(group_id=f"group-{g:05d}", error_code=0, topics=[
        NS(name=names[g % topics], partitions=[NS(partition_index=p, error_code=0,
                                                  committed_offset=10_000 + p if idle else 8_500)
                                               for p in range(PER_TOPIC)])]) for g in range(groups)])
    return {"listed": NS(error_code=0, transaction_states=listed_rows),
            "described": NS(transaction_states=txn_rows), "producers": described, "hwm": hwm, "lso": lso,
            "offsets": fetched}


def poll(state: Any, detector: Any, replies: dict[str, Any], at_ms: int) -> tuple[Any, dict[str, float]]:
    """Parse, assemble, detect, publish: the CPU part of one poll.  Returns the detector and stage times."""
    from txnwatch import detect
    from txnwatch.core.model import ClusterSnapshot, GroupSnapshot, PartitionSnapshot
    from txnwatch.kafka import parse

    stages: dict[str, float] = {}
    t = time.perf_counter()
    listed = parse.parse_list_transactions(replies["listed"], 0).value or ()
    txns = parse.parse_describe_transactions(replies["described"], 0).value
    producers = parse.parse_describe_producers(replies["producers"], 0).value
    hwm = parse.parse_list_offsets(replies["hwm"], 0, "latest/read_uncommitted").value
    lso = parse.parse_list_offsets(replies["lso"], 0, "latest/read_committed").value
    committed = parse.parse_offset_fetch(replies["offsets"]).value
    stages["parse_s"] = time.perf_counter() - t
    t = time.perf_counter()
    parts = {tp: PartitionSnapshot(tp, leader=n % BROKERS, high_watermark=hwm.get(tp), last_stable_offset=lso.get(tp),
                                   log_start_offset=0, producers=producers.get(tp))
             for n, tp in enumerate(hwm)}
    groups = {gid: GroupSnapshot(gid, "Stable", "consumer", offsets) for gid, offsets in committed.items()}
    snap = ClusterSnapshot(cluster="bench", taken_at_ms=at_ms, duration_ms=1_000, listed=tuple(listed),
                           transactions=txns, partitions=parts, groups=groups, max_transaction_timeout_ms=900_000)
    stages["assemble_s"] = time.perf_counter() - t
    t = time.perf_counter()
    detector, findings = detect.evaluate(detector, snap, at_ms)
    stages["detect_s"] = time.perf_counter() - t
    t = time.perf_counter()
    state.update("bench", up=True, polls=1, last_poll_at_ms=at_ms, last_success_at_ms=at_ms, last_poll_duration_ms=1_000,
                 snapshot=snap, findings=findings)
    stages["publish_s"] = time.perf_counter() - t
    stages["poll_s"] = sum(stages.values())
    stages["hanging"] = float(len(findings.hanging))
    return detector, stages


def _recorder(directory: str) -> Any:
    """The store's sink on a fresh SQLite file, sampling as the daemon's defaults do (whichever the tree has)."""
    from txnwatch.store import recorder as rec
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.lag_sampling import LagSampling
    from txnwatch.store.migrate import upgrade
    from txnwatch.store.offset_pictures import OffsetPictures

    url = f"sqlite:///{directory}/bench.db"
    upgrade(url)
    recorder = rec.Recorder(make_sessionmaker(make_engine(url)), {"bench": "bench:9092"},
                            lag_sampling=LagSampling(default_s=SAMPLE_INTERVAL_S),
                            offset_pictures=OffsetPictures(default_s=SAMPLE_INTERVAL_S))
    recorder.start()
    return recorder


def _rows(path: str) -> dict[str, int]:
    """Rows of the tables a poll writes."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(path)) as db:
        return {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # our own table names
                for t in ("polls", "partition_offsets", "lag_samples", "txn_ids")}


def child(partitions: int, group_partitions: int, ids: int, polls: int, profile: bool, idle: bool = False,
          store: bool = False) -> dict[str, Any]:
    from txnwatch import detect
    from txnwatch.core.views import LatestState

    base_mb = harness.memory_mb("self")["VmRSS"]
    state, detector = LatestState(["bench"]), detect.INITIAL
    now = int(time.time() * 1000) // (SAMPLE_INTERVAL_S * 1000) * (SAMPLE_INTERVAL_S * 1000)
    directory = tempfile.mkdtemp(prefix="scale-store-")
    recorder = _recorder(directory) if store else None
    runs = []
    try:
        for k in range(polls):  # each poll gets fresh answers, as from the wire; the previous poll's are dropped
            at = now + k * POLL_INTERVAL_S * 1000
            replies = answers(at, partitions, group_partitions, ids, idle)
            cpu, wall = time.process_time(), time.perf_counter()
            detector, stages = poll(state, detector, replies, at)
            if recorder is not None:
                t = time.perf_counter()
                view = state.get("bench")
                assert view is not None  # published by poll()
                recorder.on_poll("bench", view.snapshot, view.findings, None, at)
                stages["store_s"] = time.perf_counter() - t
            stages["cpu_s"], stages["wall_s"] = time.process_time() - cpu, time.perf_counter() - wall
            del replies
            runs.append(stages)
        db_bytes = sum(f.stat().st_size for f in Path(directory).glob("bench.db*"))  # the WAL too
        rows = _rows(f"{directory}/bench.db") if store else {}
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rss = harness.memory_mb("self")["VmRSS"]
    warm = runs[1:] or runs
    result: dict[str, Any] = {"base_mb": base_mb, "rss_mb": rss, "hanging": runs[-1]["hanging"], "db_bytes": db_bytes,
                              "rows": rows,
                              "cpu_mean_s": statistics.fmean(r["cpu_s"] for r in warm),
                              "wall_mean_s": statistics.fmean(r["wall_s"] for r in warm),
                              **{k: statistics.median(r.get(k, 0.0) for r in warm)
                                 for k in ("parse_s", "assemble_s", "detect_s", "publish_s", "poll_s", "store_s")}}
    if profile:
        at = now + polls * 15_000
        replies = answers(at, partitions, group_partitions, ids)
        try:
            from pyinstrument import Profiler  # type: ignore[import-not-found,unused-ignore]  # optional: [bench]
            profiler = Profiler(interval=0.001)
            profiler.start()
            detector, _ = poll(state, detector, replies, at)
            profiler.stop()
            result["profile"] = profiler.output_text(unicode=False, color=False, show_all=False)
        except ImportError:
            import cProfile
            import io
            import pstats
            prof = cProfile.Profile()
            prof.runcall(poll, state, detector, replies, at)
            out = io.StringIO()
            pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
            result["profile"] = "(cProfile; pip install pyinstrument for a call tree)\n" + out.getvalue()
    return result


def compare(args: argparse.Namespace) -> None:
    """The largest scale point on REV's code and on this checkout's, alternating, each run a fresh process."""
    polls = args.polls if args.polls != 3 else 21
    frac = float(args.fractions.split(",")[-1])
    p, g, i = int(args.partitions * frac), int(args.group_partitions * frac), int(args.ids * frac)
    commit, tree = harness.baseline_tree(args.baseline, Path(tempfile.mkdtemp(prefix="txnwatch-bench-scale-")))
    trees = {commit: tree, "this checkout": None}
    loads = harness.Loads()
    print(f"{p:,} partitions, {g:,} group partitions, {i:,} ids; {'idle' if args.idle else 'moving'} offsets; "
          f"{'with' if args.store else 'without'} the SQLite write; {polls} polls {POLL_INTERVAL_S} s apart "
          f"(the first left out)")

    def run(side: str, n: int) -> dict[str, Any]:
        out = harness.child(__file__, "--child", "--partitions", p, "--group-partitions", g, "--ids", i, "--polls",
                            polls, *(["--idle"] if args.idle else []), *(["--store"] if args.store else []),
                            env=harness.baseline_env(trees[side]))
        print(f"  round {n + 1} {side:>14}: CPU {out['cpu_mean_s']:.3f} s/poll "
              f"({out['cpu_mean_s'] * 60 / POLL_INTERVAL_S:.2f} CPU-s/min), wall {out['wall_mean_s']:.3f} s "
              f"(detect {out['detect_s']:.3f}, store {out['store_s']:.3f}), SQLite {out['db_bytes'] / 1e6:.1f} MB "
              f"{out['rows']}, load {loads.sample():.1f}", flush=True)
        return out

    results = harness.alternate(list(trees), args.rounds, run)
    old, new = (statistics.median(o["cpu_mean_s"] for o in results[side]) for side in trees)
    print(f"median CPU per poll: {commit} {old:.3f} s ({old * 60 / POLL_INTERVAL_S:.2f} CPU-s/min), this checkout "
          f"{new:.3f} s ({new * 60 / POLL_INTERVAL_S:.2f} CPU-s/min): {harness.ratio(new, old)}; "
          f"{harness.machine_line(loads)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--group-partitions", type=int, default=100_000)
    parser.add_argument("--ids", type=int, default=50_000)
    parser.add_argument("--polls", type=int, default=3)
    parser.add_argument("--fractions", default="0.25,0.5,1", help="scale points, for the memory constant")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--idle", action="store_true", help="nothing moves between polls (groups caught up)")
    parser.add_argument("--store", action="store_true", help="add the recorder's SQLite write of each poll")
    parser.add_argument("--baseline", metavar="REV", help="compare REV's code with this checkout's (git revision)")
    parser.add_argument("--rounds", type=int, default=3, help="--baseline: runs of each side")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        harness.reply(child(args.partitions, args.group_partitions, args.ids, args.polls, args.profile, args.idle,
                            args.store))
        return 0
    if args.baseline:
        compare(args)
        return 0

    loads = harness.Loads()
    loads.sample()
    print(harness.machine_line(loads))
    points = []
    fractions = [float(f) for f in args.fractions.split(",")]
    for frac in fractions:
        p, g, i = (int(args.partitions * frac), int(args.group_partitions * frac), int(args.ids * frac))
        out = harness.child(__file__, "--child", "--partitions", p, "--group-partitions", g, "--ids", i, "--polls",
                            args.polls, *(["--profile"] if args.profile and frac == fractions[-1] else []))
        objects = p + g + i
        points.append((objects, out))
        print(f"{p:>7,} partitions {g:>7,} group partitions {i:>6,} ids: poll {out['poll_s']:.2f} s "
              f"(parse {out['parse_s']:.2f}, assemble {out['assemble_s']:.2f}, detect {out['detect_s']:.2f}, "
              f"publish {out['publish_s']:.2f}), RSS {out['rss_mb']:.0f} MB (idle {out['base_mb']:.0f} MB), "
              f"{out['hanging']:.0f} hanging")
    if len(points) >= 2:
        (o1, a), (o2, b) = points[0], points[-1]
        per_obj_kb = (b["rss_mb"] - a["rss_mb"]) * 1024 / max(1, o2 - o1)
        print(f"memory growth: {per_obj_kb:.2f} KB per object (partition, group partition or id), "
              f"RSS ~ {a['rss_mb'] - per_obj_kb * o1 / 1024:.0f} MB + {per_obj_kb:.2f} KB x objects")
    objects, top = points[-1]
    print(f"goals at {objects:,} objects: poll {top['poll_s']:.2f} s vs <= {GOAL_POLL_S:g} s "
          f"(ratio {top['poll_s'] / GOAL_POLL_S:.2f}); RSS {top['rss_mb']:.0f} MB vs <= {GOAL_RSS_MB} MB "
          f"(ratio {top['rss_mb'] / GOAL_RSS_MB:.2f})")
    if "profile" in top:
        print(top["profile"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
