"""/metrics pays for change (issue 25): CPU per render at ~50k series, full render vs the per-family cache.

The synthetic cluster of benchmarks/scrape.py (partitions, transactional ids, groups) is polled and
detected for real; then, per render, the CPU seconds (``time.process_time``, this process only) and wall
time are measured for:

* ``before``: the render as it was (txnwatch.metrics.render.render_gzip: every family formatted and
  compressed every time);
* ``after, unchanged``: the per-family cache (txnwatch.metrics.family_cache) after a poll of an idle
  cluster (a new snapshot and findings, the same offsets: what an idle lab does every 15 s);
* ``after, changed``: the cache after a poll in which every partition's high watermark moved.

Prints the median of ``--repeat`` renders for each, ratios, the families formatted vs reused, and the
machine's load average.  Never asserted.

    .venv/bin/python benchmarks/render_change.py [--partitions 5300] [--ids 2000] [--groups 200] [--repeat 7]
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prometheus_client.core import Metric
from prometheus_client.registry import CollectorRegistry

from benchmarks.scrape import CLUSTER, snapshot  # the same synthetic cluster as the scrape benchmark
from txnwatch import detect
from txnwatch.core.views import LatestState
from txnwatch.metrics.family_cache import FamilyCache
from txnwatch.metrics.registry import build_registry
from txnwatch.metrics.render import render_gzip


def _measure(render: Callable[[], bytes], before_each: Callable[[], None], repeat: int) -> tuple[float, float, bytes]:
    cpu, wall, body = [], [], b""
    for _ in range(repeat):
        before_each()
        c, w = time.process_time(), time.perf_counter()
        body = render()
        cpu.append(time.process_time() - c)
        wall.append(time.perf_counter() - w)
    return statistics.median(cpu), statistics.median(wall), body


class _Fixed:
    def __init__(self, families: list[Metric]) -> None:
        self.families = families

    def collect(self) -> list[Metric]:
        return self.families


def _same_text(cache: FamilyCache, registry: CollectorRegistry) -> None:
    """The cache's body is the full render's text (one collect for both: ages move with the clock)."""
    families = list(registry.collect())
    assert gzip.decompress(cache.render_gzip(families)) == gzip.decompress(render_gzip(_Fixed(families)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=5300)
    parser.add_argument("--ids", type=int, default=2000)
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    state = LatestState([CLUSTER])
    registry = build_registry(state, lambda: True)
    detector, at = detect.INITIAL, int(time.time() * 1000)
    fixed_at = at

    def poll(moved: bool) -> None:
        nonlocal detector, at
        at += 15_000
        snap = snapshot(at if moved else fixed_at, args.partitions, args.ids, args.groups)  # idle: same offsets
        detector, findings = detect.evaluate(detector, snap, at)
        state.update(CLUSTER, up=True, polls=1, last_poll_at_ms=at, last_success_at_ms=at, last_poll_duration_ms=600,
                     snapshot=snap, findings=findings)

    poll(False)
    poll(False)
    body = gzip.decompress(render_gzip(registry))
    series = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    cache = FamilyCache()
    cache.render_gzip(registry.collect())  # the first render formats everything, as before

    def idle_poll() -> None:
        poll(False)

    def moving_poll() -> None:
        poll(True)

    before_cpu, before_wall, _ = _measure(lambda: render_gzip(registry), idle_poll, args.repeat)
    same_cpu, same_wall, same_body = _measure(lambda: cache.render_gzip(registry.collect()), idle_poll, args.repeat)
    same_counts = (cache.rendered, cache.reused)
    _same_text(cache, registry)
    moved_cpu, moved_wall, _ = _measure(lambda: cache.render_gzip(registry.collect()), moving_poll,
                                                 args.repeat)
    moved_counts = (cache.rendered, cache.reused)
    _same_text(cache, registry)
    collect_cpu, _, _ = _measure(lambda: bytes(len(list(registry.collect()))), idle_poll, args.repeat)

    load = os.getloadavg()[0]
    print(f"{series:,} series ({len(body) / 1e6:.1f} MB text; gzip {len(same_body) / 1e6:.2f} MB per family vs "
          f"{len(render_gzip(registry)) / 1e6:.2f} MB whole); {args.partitions} partitions, {args.ids} ids, "
          f"{args.groups} groups; median of {args.repeat} renders; load average {load:.1f} on {os.cpu_count()} CPUs")
    print(f"  of which collecting the families (both paths): {collect_cpu * 1000:.0f} ms CPU")
    print(f"  before (every family formatted + compressed): {before_cpu * 1000:.0f} ms CPU, {before_wall * 1000:.0f} ms wall")
    print(f"  after, unchanged poll: {same_cpu * 1000:.0f} ms CPU, {same_wall * 1000:.0f} ms wall "
          f"({same_counts[0]} families formatted, {same_counts[1]} reused); CPU after/before {same_cpu / before_cpu:.2f}")
    print(f"  after, every offset moved: {moved_cpu * 1000:.0f} ms CPU, {moved_wall * 1000:.0f} ms wall "
          f"({moved_counts[0]} formatted, {moved_counts[1]} reused); CPU after/before {moved_cpu / before_cpu:.2f}")
    per_min = 60 / 15  # one render after each 15 s poll (the max-age timer renders only when no poll came)
    print(f"  at {per_min:.0f} renders a minute (15 s polls): {before_cpu * per_min:.2f} -> {same_cpu * per_min:.2f} "
          f"CPU-s/min on an idle cluster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
