"""Peak memory of `txnwatch run` with compression bombs committed at, side by side with an older checkout.

Issue 23 item 2: a 204 KB gzip record of 200 MB of zeros with a group's offset committed at it
took the time-lag fetch from 100 to 702 MB, past the Helm chart's 512Mi limit.  This writes one
gzip and one zstd batch, each a 200 MB record of zeros followed by a small record, commits
groups at both records of both batches and at three plain lagging partitions, then runs
`txnwatch run` (SQLite, 1 s polls) for a few polls and prints its peak RSS (VmHWM), CPU seconds
and what it reports as each group's time lag.  With ``--compare-source DIR`` (the root of an
older checkout, e.g. ``git worktree add /tmp/before <commit>``) the same daemon from that tree
runs too, one after the other, on the same cluster.

    .venv/bin/python benchmarks/compression_bomb.py                       # one-broker lab, ~2 min
    .venv/bin/python benchmarks/compression_bomb.py --compare-source /tmp/before
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "service"))
sys.path.insert(0, str(ROOT))

from tests.e2e.test_compression_bomb import (  # noqa: E402
    BOMB_BYTES,
    commit_offset,
    produce_one_batch,
    vm_hwm_bytes,
)
from tests.fixtures.daemon import free_port, wait_for  # noqa: E402

CHART_LIMIT_MIB = 512
AGE_S = {"bomb": 900, "after": 600, "plain": 300}


def prepare(bootstrap: str) -> dict[str, tuple[str, int, int]]:
    """Topics, the two bombs, plain records and the groups; group -> (topic, partition, committed offset)."""
    from txnwatch.lab.topics import create_topic
    from txnwatch.lab.wire import admin_client

    suffix = str(int(time.time()))
    bombs, plain = f"bombs-{suffix}", f"plain-{suffix}"
    admin = admin_client(bootstrap)
    try:
        create_topic(admin, bombs, partitions=2, replication=1)
        create_topic(admin, plain, partitions=3, replication=1)
    finally:
        admin.close()
    now_ms = int(time.time() * 1000)
    ts = {k: now_ms - s * 1000 for k, s in AGE_S.items()}
    zeros = bytes(BOMB_BYTES)
    for partition, codec in enumerate(("gzip", "zstd")):
        produce_one_batch(bootstrap, bombs, partition, codec, [(zeros, ts["bomb"]), (b"after", ts["after"])])
    del zeros
    for p in range(3):
        produce_one_batch(bootstrap, plain, p, None, [(b"x" * 100, ts["plain"] + i) for i in range(10)])
    groups = {"gzip-bomb": (bombs, 0, 0), "gzip-after-bomb": (bombs, 0, 1), "zstd-bomb": (bombs, 1, 0),
              "zstd-after-bomb": (bombs, 1, 1), **{f"plain-{p}": (plain, p, 0) for p in range(3)}}
    for group, (topic, partition, offset) in groups.items():
        commit_offset(bootstrap, f"{group}-{suffix}", topic, partition, offset)
    return {f"{g}-{suffix}": where for g, where in groups.items()}


@dataclass(frozen=True)
class Run:
    peak_mib: float
    cpu_s: float
    wall_s: float
    lag_s: dict[str, float]  # group -> txnwatch_consumergroup_lag_seconds
    unknown: dict[str, str]  # group -> reason of txnwatch_consumergroup_lag_seconds_unknown


def run_daemon(source: Path, bootstrap: str, topics: set[str], polls: int, work: Path) -> Run:
    port = free_port()
    config = work / "config.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{work / 'db.sqlite'}", "poll_interval_seconds": 1,
        "api": {"host": "127.0.0.1", "port": port},
        "clusters": [{"name": "lab", "bootstrap_servers": bootstrap, "topics_include": sorted(topics)}]}))
    env = dict(os.environ, PYTHONPATH=str(source / "service"))
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                            stdout=(work / "txnwatch.log").open("wb"), stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        def polled() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
            text = httpx.get(base + "/metrics", timeout=10).text
            samples = {(s.name, frozenset(s.labels.items())): s.value
                       for f in text_string_to_metric_families(text) for s in f.samples}
            done = samples.get(("txnwatch_polls_total", frozenset({("cluster", "lab")})), 0) >= polls
            return samples if done else None

        samples = wait_for(polled, 300, what=f"{polls} polls")
        wall = time.perf_counter() - started
        fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        peak = vm_hwm_bytes(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    lag = {dict(k[1])["consumergroup"]: v for k, v in samples.items()
           if k[0] == "txnwatch_consumergroup_lag_seconds"}
    unknown = {dict(k[1])["consumergroup"]: dict(k[1])["reason"] for k, v in samples.items()
               if k[0] == "txnwatch_consumergroup_lag_seconds_unknown" and v == 1}
    return Run(peak / 2**20, cpu, wall, lag, unknown)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="an existing cluster (default: start a one-broker lab here)")
    parser.add_argument("--compare-source", type=Path, help="root of an older checkout to run as well")
    parser.add_argument("--polls", type=int, default=5)
    args = parser.parse_args()
    lab = None
    bootstrap = args.bootstrap
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bomb-"))
    if bootstrap is None:
        from txnwatch.lab.cluster import start_lab
        from txnwatch.lab.settings import LabSettings

        lab = start_lab(LabSettings(brokers=1), work / "lab", die_with_parent=True, quiet=True)
        bootstrap = lab.bootstrap_servers
    try:
        groups = prepare(bootstrap)
        topics = {t for t, _, _ in groups.values()}
        sources = {"this tree": ROOT}
        if args.compare_source:
            sources[str(args.compare_source)] = args.compare_source.resolve()
        results: dict[str, Run] = {}
        loads = [os.getloadavg()[0]]
        for name, source in sources.items():
            run_dir = work / f"run-{len(results)}"
            run_dir.mkdir()
            results[name] = run_daemon(source, bootstrap, topics, args.polls, run_dir)
            loads.append(os.getloadavg()[0])
    finally:
        if lab is not None:
            lab.down()
    print(f"two {BOMB_BYTES / 1e6:.0f} MB bombs (gzip, zstd), {len(groups)} groups, {args.polls} polls of 1 s; "
          f"load average {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    print(f"{'daemon':<28} {'peak RSS MiB':>12} {'/ 512Mi':>8} {'CPU s':>6} {'wall s':>7}")
    for name, r in results.items():
        print(f"{name:<28} {r.peak_mib:>12.0f} {r.peak_mib / CHART_LIMIT_MIB:>8.2f} {r.cpu_s:>6.1f} {r.wall_s:>7.1f}")
    print("time lag per group (written ages: bomb 900 s, after-bomb 600 s, plain 300 s)")
    for group in groups:
        cells = []
        for r in results.values():
            cells.append(f"unknown ({r.unknown[group]})" if group in r.unknown else
                         f"{r.lag_s[group]:.0f} s" if group in r.lag_s else "-")
        print(f"  {group:<34} " + "  ".join(f"{c:>32}" for c in cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
