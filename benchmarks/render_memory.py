"""Issue 18 item 2: what the /metrics render costs in memory, apart from the poll, before and after.

The daemon's peak RSS at 80,000 partitions was 1.08 GB (goal <= 1 GB) against 322 MB for the poll alone;
the render of ~700,000 series was the difference (docs/performance.md).  This builds the state the render
shows — scrape.py's synthesised snapshots (``--partitions``, ``--ids``, ``--groups`` with 10 committed
partitions each; a group's lag series cover every partition of the topics it reads), two polls through the
real detection, published into LatestState — then, in a fork of that process per measurement (so each
starts from the same state and the same heap):

* the exposition's own ``render()`` run twice in its render thread, as the daemon runs it (the previous
  render is held while the next is made): the process's peak RSS above the state (``VmHWM`` after
  ``clear_refs``), what is still held after, the wall time;
* the same after ``malloc_trim(0)`` (glibc): how much of what is held is free memory not given back;
* the collectors' families alone, all held at once (``list(registry.collect())``): their share of the peak;
* with ``--tracemalloc``: the Python heap's own peak during one render (slow; tells heap from allocator).

``--baseline REF`` runs the same measurement with the txnwatch of a git revision (its ``service/`` tree,
exported to a temporary directory) in the same run, side by side.  The render here is checked byte for
byte against prometheus-client's ``generate_latest`` of the same registry.  Figures are printed next to
the goal, never asserted.

    .venv/bin/python benchmarks/render_memory.py [--partitions 80000 --ids 50000 --groups 1600]
        [--granularity partition|topic] [--baseline main] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import gzip
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
GOAL_RSS_MB = 1024  # the daemon's whole peak RSS at 80k partitions (issue 18 item 2)
DAEMON_PEAK_BEFORE_MB = 1081  # measured on the real 80k lab before this change (docs/performance.md)


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def _measure_in_fork(name: str, run: Any) -> dict[str, Any]:
    """``run()`` in a forked child (the state shared, copy-on-write); its peak RSS above the state."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: measure, write one JSON line, leave without cleanup
        try:
            os.close(read)
            with open("/proc/self/clear_refs", "w") as refs:
                refs.write("5")  # resets VmHWM to the current RSS
            state_mb = _status_mb("VmRSS")
            result = {"name": name, "state_mb": state_mb, **run()}
            result["peak_above_mb"] = result.pop("peak_mb", _status_mb("VmHWM")) - state_mb
        except BaseException as exc:  # report, do not raise into the parent's code path
            result = {"name": name, "error": repr(exc)}
        os.write(write, json.dumps(result).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return json.loads(data)


def child(args: argparse.Namespace) -> list[dict[str, Any]]:
    sys.path.insert(0, str(Path(args.tree) / "service"))
    from txnwatch import detect  # from the tree under test; scrape.py's own path insert comes after
    from txnwatch.core.views import LatestState
    from txnwatch.metrics.exposition import Exposition
    from txnwatch.metrics.lag import LagMetricOptions
    from txnwatch.metrics.registry import build_registry

    sys.path.insert(1, str(ROOT))
    from benchmarks.scrape import CLUSTER, snapshot

    state, detector, now = LatestState([CLUSTER]), detect.INITIAL, int(time.time() * 1000)
    for at in (now - 15_000, now):
        snap = snapshot(at, args.partitions, args.ids, args.groups)
        detector, findings = detect.evaluate(detector, snap, at)
        state.update(CLUSTER, up=True, polls=2, last_poll_at_ms=at, last_success_at_ms=at,
                     last_poll_duration_ms=600, snapshot=snap, findings=findings)
    del snap, findings
    registry = build_registry(state, lambda: True, LagMetricOptions(granularity=args.granularity))
    gc.collect()
    libc = ctypes.CDLL("libc.so.6")

    def render_twice() -> dict[str, Any]:
        exposition = Exposition(registry)
        times: list[float] = []

        def in_thread() -> None:  # as the daemon renders: in the exposition's own thread
            for _ in range(2):  # the second render runs while the first is held, as in the daemon
                started = time.perf_counter()
                exposition.render()
                times.append(time.perf_counter() - started)

        thread = threading.Thread(target=in_thread, name="metrics-exposition")
        thread.start()
        thread.join()
        peak, held = _status_mb("VmHWM"), _status_mb("VmRSS")
        libc.malloc_trim(0)  # what of the held memory is free but not given back to the system
        trimmed = _status_mb("VmRSS")
        rendered: Any = exposition._rendered  # the baseline kept (text, gzip), this tree the gzip only
        gzipped = rendered[1] if isinstance(rendered, tuple) else rendered
        text = gzip.decompress(gzipped)
        series = sum(1 for line in text.splitlines() if line and not line.startswith(b"#"))
        identical = None
        if args.check:  # the same families (ages move with the clock between two collects) both ways
            from prometheus_client import generate_latest

            from txnwatch.metrics.render import render_text

            class Fixed:
                def __init__(self) -> None:
                    self.families = list(registry.collect())

                def collect(self) -> Any:
                    return iter(self.families)

            fixed = Fixed()
            identical = render_text(fixed) == generate_latest(fixed)
        return {"render_s": times[-1], "peak_mb": peak, "held_mb": held, "after_trim_mb": trimmed,
                "series": series, "gzip_mb": len(gzipped) / 1e6, "identical": identical}

    def families_only() -> dict[str, Any]:  # what the collectors' families alone hold, all at once
        families = list(registry.collect())
        return {"peak_mb": _status_mb("VmHWM"), "families": len(families)}

    results = [_measure_in_fork("render", render_twice), _measure_in_fork("families", families_only)]
    if args.tracemalloc:
        def traced() -> dict[str, Any]:
            import tracemalloc
            tracemalloc.start(1)
            Exposition(registry).render()
            current, peak = tracemalloc.get_traced_memory()
            top = tracemalloc.take_snapshot().statistics("lineno")[:5]
            return {"heap_peak_mb": peak / 1e6, "heap_after_mb": current / 1e6,
                    "top": [f"{s.size / 1e6:.1f} MB {s.traceback}" for s in top]}
        results.append(_measure_in_fork("tracemalloc", traced))
    return results


def export_tree(ref: str) -> Path:
    """The ``service/`` and ``benchmarks/`` trees of a git revision, in a temporary directory."""
    target = Path(tempfile.mkdtemp(prefix="txnwatch-render-baseline-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "service"], check=True,
                             capture_output=True).stdout
    with tempfile.TemporaryFile() as tmp:
        tmp.write(archive)
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            tar.extractall(target, filter="data")
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=80_000)
    parser.add_argument("--ids", type=int, default=50_000)
    parser.add_argument("--groups", type=int, default=1_600)
    parser.add_argument("--granularity", choices=("partition", "topic"), default="partition")
    parser.add_argument("--baseline", metavar="REF", help="also measure the txnwatch of this git revision")
    parser.add_argument("--tracemalloc", action="store_true", help="also the Python heap's peak (slow)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=str(ROOT), help=argparse.SUPPRESS)
    parser.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args)))
        return 0

    trees = [("this tree", ROOT)]
    if args.baseline:
        trees.insert(0, (f"baseline {args.baseline}", export_tree(args.baseline)))
    print(f"machine: {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}; state: {args.partitions:,} "
          f"partitions, {args.ids:,} ids, {args.groups:,} groups x 10 partitions; granularity {args.granularity}")
    for label, tree in trees:
        cmd = [sys.executable, __file__, "--child", "--tree", str(tree), "--partitions", str(args.partitions),
               "--ids", str(args.ids), "--groups", str(args.groups), "--granularity", args.granularity]
        cmd += (["--tracemalloc"] if args.tracemalloc else []) + (["--check"] if tree == ROOT else [])
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        for r in json.loads(out.strip().splitlines()[-1]):
            if "error" in r:
                print(f"{label:>16}: {r['name']} failed: {r['error']}")
            elif r["name"] == "render":
                same = {True: "byte-identical to generate_latest", False: "DIFFERS from generate_latest",
                        None: "not compared"}[r["identical"]]
                print(f"{label:>16}: state {r['state_mb']:.0f} MB; render {r['series']:,} series "
                      f"({r['gzip_mb']:.1f} MB gzip) in {r['render_s']:.1f} s; peak RSS +{r['peak_above_mb']:.0f} MB "
                      f"above the state; held after +{r['held_mb'] - r['state_mb']:.0f} MB, after malloc_trim(0) "
                      f"{r['after_trim_mb'] - r['state_mb']:+.0f} MB; {same}")
            elif r["name"] == "families":
                print(f"{label:>16}: the {r['families']} families alone (collect(), all held): peak RSS "
                      f"+{r['peak_above_mb']:.0f} MB above the state")
            else:
                print(f"{label:>16}: Python heap (tracemalloc) peak {r['heap_peak_mb']:.0f} MB during one render, "
                      f"{r['heap_after_mb']:.0f} MB after; largest at the end:")
                for line in r["top"]:
                    print(f"{'':>20}{line}")
    print(f"the daemon's whole peak RSS at 80k partitions was {DAEMON_PEAK_BEFORE_MB} MB before (goal <= "
          f"{GOAL_RSS_MB} MB); the render's part of it is the peak above the state (benchmarks/biglab.py measures "
          f"the whole daemon)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
