"""Issue 25, CPU: what one small commit of the transaction-log tail costs, through the real ClusterTail and
CommitWriter on SQLite.

On the steady workload of the peers lab the log is a trickle: a fetch round every 2 s brings a few records, and
the tail commits about once per round, so the writer thread (``txnlog-w:CLUSTER``) pays the transaction's fixed
cost for a handful of rows.  Here a fake log (the Kafka boundary) hands the tail ``--records`` records of
``--ids`` transactional ids per read (Ongoing, PrepareCommit, CompleteCommit in turn), then an empty read, which
hands the commit to the writer; the tail collects it before the next read.  After ``--warmup`` commits, the next
``--commits`` are timed: CPU-µs per commit of the writer thread (its utime + stime from /proc, by its OS name)
and of the tail's thread (the two steps: apply, merge, positions, gap watch, publication), with the wall time.

``--baseline REF`` runs another commit's ``service/`` and migrations (from ``git archive``; this script stays this checkout's)
in the same run, alternating the two in fresh child processes ``--rounds`` times each, so load from elsewhere
drifts into both alike; it prints the medians and their ratio.  Quote the load average beside the figures.

    .venv/bin/python benchmarks/txnlog_commits.py                       # this checkout
    .venv/bin/python benchmarks/txnlog_commits.py --baseline main       # this checkout against main, A/B
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # benchmarks' own modules (appended: never ahead of a baseline)

from benchmarks.thread_cpu import thread_cpu_s  # noqa: E402  (needs ROOT on sys.path)


def child(commits: int, warmup: int, records: int, ids: int) -> dict[str, Any]:
    """One run on the code first on sys.path (``--service``)."""
    from benchmarks.scratch_store import scratch_store
    from txnwatch.collect.txnlog_tail import ClusterTail
    from txnwatch.core.model import TxnLogKind, TxnLogRecord, TxnState
    from txnwatch.core.views import LatestState

    cycle = (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)

    class Log:
        """The Kafka boundary: each fed batch comes back from one read, then reads are empty."""

        def __init__(self, positions: dict[int, int]) -> None:
            self.next = {p: positions.get(p, 0) for p in range(50)}
            self.batches: list[list[TxnLogRecord]] = []
            self.sent = 0
            self.start_ms = int(time.time() * 1000)

        def feed(self) -> None:
            batch = []
            for _ in range(records):
                n, self.sent = self.sent, self.sent + 1
                producer = n % ids
                part, state = producer * 7 % 50, cycle[n // ids % 3]
                at = self.start_ms + n
                batch.append(TxnLogRecord(f"app-{producer}", part, self.next[part], at, TxnLogKind.VALUE, state,
                                          None, 1_000 + producer, 0, 60_000,
                                          (("orders", producer),) if state is not TxnState.COMPLETE_COMMIT else (),
                                          at, at, None, None, 2))
                self.next[part] += 1
            self.batches.append(batch)

        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[Any]]:
            return (self.batches.pop(0) if self.batches else []), []

        def positions(self) -> dict[int, int]:
            return dict(self.next)

        def end_offsets(self) -> dict[int, int]:
            return dict(self.next)

        def close(self) -> None:
            pass

    engine, sessions, _ = scratch_store("txnlog-commits-")
    opened: list[Log] = []

    def open_tail(positions: Any) -> Log:
        opened.append(Log(dict(positions)))
        return opened[-1]

    clock = [time.time()]
    tail = ClusterTail("bench", "bench:9092", open_tail, sessions, LatestState(["bench"]), clock=lambda: clock[0])
    tail.step()  # opens the log

    def commit() -> None:
        opened[-1].feed()
        clock[0] += 0.5
        tail.step()  # the records, applied
        clock[0] += 0.5
        tail.step()  # an empty read: the commit goes to the writer
        assert tail.wait_committed()

    for _ in range(warmup):
        commit()
    writer0, tail0, wall0 = thread_cpu_s().get("txnlog-w:bench", 0.0), time.thread_time(), time.perf_counter()
    for _ in range(commits):
        commit()
    wall, tail_cpu = time.perf_counter() - wall0, time.thread_time() - tail0
    writer = thread_cpu_s().get("txnlog-w:bench", 0.0) - writer0
    tail.close()
    engine.dispose()
    import txnwatch

    return {"writer_us": writer / commits * 1e6, "tail_us": tail_cpu / commits * 1e6,
            "wall_us": wall / commits * 1e6, "code": txnwatch.__file__}


def _service_of(ref: str, into: Path) -> Path:
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", ref, "service", "alembic",
                              "alembic.ini"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into / "baseline", filter="data")
    return into / "baseline" / "service"


def _run(service: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", str(service), "--commits", str(args.commits),
                          "--warmup", str(args.warmup), "--records", str(args.records), "--ids", str(args.ids)],
                         check=True, capture_output=True, text=True,
                         env=dict(os.environ, TXNWATCH_ALEMBIC_DIR=str(service.parent))).stdout
    run: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    assert Path(run["code"]).is_relative_to(service), run["code"]
    return run


def _line(name: str, run: dict[str, Any]) -> str:
    return (f"{name:>15}: writer {run['writer_us']:6.0f} CPU-µs/commit, tail {run['tail_us']:5.0f} CPU-µs/commit, "
            f"wall {run['wall_us']:6.0f} µs/commit")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", metavar="REF", help="also run this commit's service/, alternating")
    parser.add_argument("--rounds", type=int, default=5, help="child runs per side")
    parser.add_argument("--commits", type=int, default=2_000, help="timed commits per run")
    parser.add_argument("--warmup", type=int, default=200, help="commits before the timed ones")
    parser.add_argument("--records", type=int, default=10, help="records per commit")
    parser.add_argument("--ids", type=int, default=3, help="transactional ids the records cycle through")
    parser.add_argument("--child", metavar="SERVICE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        sys.path.insert(0, args.child)
        print(json.dumps(child(args.commits, args.warmup, args.records, args.ids)))
        return 0
    with tempfile.TemporaryDirectory(prefix="txnlog-commits-src-") as tmp:
        sides = {"this checkout": ROOT / "service"}
        if args.baseline:
            sides = {args.baseline: _service_of(args.baseline, Path(tmp)), **sides}
        print(f"== the tail's small commits on SQLite: {args.records} records of {args.ids} ids per commit, "
              f"{args.commits:,} timed after {args.warmup:,}, {args.rounds} run(s) per side, alternating; "
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
        for n in range(args.rounds):
            for name in (list(sides) if n % 2 == 0 else list(reversed(sides))):
                run = _run(sides[name], args)
                runs[name].append(run)
                print(f"   round {n + 1} {_line(name, run)}   load {os.getloadavg()[0]:.2f}")
        medians = {name: {k: statistics.median(r[k] for r in rs) for k in ("writer_us", "tail_us", "wall_us")}
                   for name, rs in runs.items()}
        for name, med in medians.items():
            print(f"   median {_line(name, med)}")
        if args.baseline:
            mine, base = medians["this checkout"], medians[args.baseline]
            print(f"   this checkout / {args.baseline}: writer CPU {mine['writer_us'] / base['writer_us']:.2f}, "
                  f"tail CPU {mine['tail_us'] / base['tail_us']:.2f}, writer + tail "
                  f"{(mine['writer_us'] + mine['tail_us']) / (base['writer_us'] + base['tail_us']):.2f}, wall "
                  f"{mine['wall_us'] / base['wall_us']:.2f}   load now {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
