"""CPU of one admin poll on a running cluster, with the kept request bytes and without (issue 25).

Polls the cluster behind ``--bootstrap`` the way the daemon's ``ClusterConnection.poll()`` does (the same
``collect`` on kafka-python's IO loop, one client), alternating poll by poll between:

* ``kept``: the ListOffsets and DescribeProducers requests from a ``RequestMemo`` (kafka/encoded.py), as the
  daemon polls since issue 25's sixth round;
* ``fresh``: those requests built and encoded at every poll, as before.

Alternating in one process lets load from elsewhere on the machine drift into both columns alike.  CPU is
``time.process_time`` around each poll (the IO thread does the work; the caller only waits).  Prints the
median and mean CPU ms per poll, wall ms, their ratio and the load average; ``--profile`` then polls
``--polls`` more times (``kept``) under cProfile, enabled on the IO thread, and prints its top functions.  The first-record and record-count fetches
(rounds 4 and 5) are left out of both columns.  Never asserted.

Use the issue's lab as ``benchmarks/peers.py --keep-lab`` leaves it (2,009 partitions, 12,000 group
partitions), then take it down with ``txnwatch lab down --dir <lab dir>``:

    .venv/bin/python benchmarks/peers.py --skip-peers --minutes 1 --probe-seconds 0 --keep-lab
    .venv/bin/python benchmarks/admin_poll.py --bootstrap 127.0.0.1:PORT [--polls 20] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from txnwatch.kafka.connection import ClusterConnection
from txnwatch.kafka.encoded import RequestMemo
from txnwatch.kafka.poll import Collected, collect
from txnwatch.kafka.settings import ClusterConnectionSettings
from txnwatch.kafka.wire import ManagerWire


def poll_once(connection: ClusterConnection, memo: RequestMemo | None,
              profiler: cProfile.Profile | None) -> tuple[float, float, Collected]:
    """CPU and wall seconds of one poll, and what it collected."""
    settings = connection.settings
    client = connection._connected()  # the daemon's client, reached as its poll() does
    wire = ManagerWire(client.manager, settings.request_timeout_ms, client.max_in_flight)

    async def polled() -> Collected:
        if profiler is not None:
            profiler.enable()  # on the IO thread, where the poll's work runs
        try:
            return await collect(wire, settings, taken_at_ms=int(time.time() * 1000), known_max_timeout_ms=None,
                                 requests=memo)
        finally:
            if profiler is not None:
                profiler.disable()

    cpu0, wall0 = time.process_time(), time.monotonic()
    collected: Collected = client.run(polled)
    return time.process_time() - cpu0, time.monotonic() - wall0, collected


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", required=True, help="host:port[,host:port...] of the cluster")
    parser.add_argument("--polls", type=int, default=20, help="measured polls per column")
    parser.add_argument("--warmup", type=int, default=2, help="polls per column left out")
    parser.add_argument("--profile", action="store_true", help="cProfile's top functions over the kept polls")
    args = parser.parse_args()

    settings = ClusterConnectionSettings(name="bench", bootstrap_servers=tuple(args.bootstrap.split(",")))
    memo = RequestMemo()
    profiler = cProfile.Profile() if args.profile else None
    cpu: dict[str, list[float]] = {"kept": [], "fresh": []}
    wall: dict[str, list[float]] = {"kept": [], "fresh": []}
    load0 = os.getloadavg()
    shape: Any = None
    with ClusterConnection(settings) as connection:
        for i in range(args.warmup + args.polls):
            for column in ("kept", "fresh"):
                measured = i >= args.warmup
                c, w, collected = poll_once(connection, memo if column == "kept" else None, None)
                if measured:
                    cpu[column].append(c)
                    wall[column].append(w)
                shape = collected.snapshot
        load1 = os.getloadavg()
        if profiler is not None:
            for _ in range(args.polls):
                poll_once(connection, memo, profiler)
    group_partitions = sum(len(g.offsets) for g in shape.groups.values())
    print(f"cluster: {len(shape.brokers)} brokers, {len(shape.partitions)} partitions, {len(shape.groups)} groups, "
          f"{group_partitions} group partitions; {args.polls} polls per column, alternating")
    for column in ("kept", "fresh"):
        print(f"  {column:5}: CPU {statistics.median(cpu[column]) * 1000:6.1f} ms/poll median, "
              f"{statistics.fmean(cpu[column]) * 1000:6.1f} mean; wall {statistics.median(wall[column]) * 1000:6.1f} ms "
              "median")
    saved = statistics.median(cpu["fresh"]) - statistics.median(cpu["kept"])
    print(f"  kept/fresh CPU (medians): {statistics.median(cpu['kept']) / statistics.median(cpu['fresh']):.2f}; "
          f"saved {saved * 1000:.1f} ms/poll = {saved * 4:.3f} CPU-s/min at 15 s polls")
    print(f"  load average before {load0[0]:.2f}, after {load1[0]:.2f}")
    if profiler is not None:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
        print(f"cProfile over {args.polls} more kept polls (its own overhead included):")
        print(out.getvalue())


if __name__ == "__main__":
    main()
