"""What ``transactional_id_pattern`` saves a poll on a cluster of many transactional ids (issue 26 item 2).

Starts a lab (Kafka 4.1+, which speaks ListTransactions v2), gives ``--ids`` transactional ids a producer id
with benchmarks/poll.py's raw-protocol fixture (InitProducerId on many connections at once), then polls it
with ``ClusterConnection.poll()`` three ways, alternating poll by poll in one process so load from elsewhere
drifts into every column alike:

* **no pattern**: every id listed and described (what txnwatch did before);
* **pattern, client-side**: the pattern filtered by txnwatch, as on a broker older than 4.1 (ListTransactions
  v2 switched off for these polls): every id still crosses the network in the listing, only the tenant's are
  described;
* **pattern, server-side**: ListTransactions v2 (KIP-1152), the broker keeps only the tenant's ids.

The pattern selects ``--tenant`` of the ids (a prefix, as a tenant's naming convention would).  Printed per
variant: the median wall and CPU time of a poll, the bytes the poll read from and wrote to its sockets
(the kernel's per-socket counters, ``ss -tinp``, around the poll), ids listed and described, and the ratio to the
unfiltered poll; the machine's load average beside them.  Nothing is asserted.

    python benchmarks/list_filters.py                  # 50k ids, 500 of them the tenant's (~2-4 min to build)
    python benchmarks/list_filters.py --ids 5000 --tenant 100 --polls 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import poll as fixtures  # the raw-protocol fixture builders


def _io() -> tuple[int, int]:
    """Bytes this process's TCP connections have received and sent so far (``ss -tinp``: the kernel's per-socket
    counters; /proc/self/io would miss them, recv() is not counted there)."""
    out = subprocess.run(["ss", "-tinpH", "state", "established"], capture_output=True, text=True, check=True).stdout
    mine, received, sent = f"pid={os.getpid()},", 0, 0
    lines = out.splitlines()
    for head, info in zip(lines[::2], lines[1::2], strict=False):
        if mine in head:
            fields = dict(f.split(":", 1) for f in info.split() if f.startswith(("bytes_received:", "bytes_sent:")))
            received += int(fields.get("bytes_received", 0))
            sent += int(fields.get("bytes_sent", 0))
    return received, sent


def _measure(conn: Any, client_side: bool) -> dict[str, float]:
    from txnwatch.kafka import batches

    saved = batches.LIST_TRANSACTIONS_PATTERN_VERSION
    if client_side:  # as on Kafka < 4.1: txnwatch does not send the pattern and filters the full listing
        batches.LIST_TRANSACTIONS_PATTERN_VERSION = 99
    try:
        read0, wrote0 = _io()
        cpu0, wall0 = time.process_time(), time.perf_counter()
        snapshot = conn.poll()
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
        read1, wrote1 = _io()
    finally:
        batches.LIST_TRANSACTIONS_PATTERN_VERSION = saved
    return {"wall_s": wall, "cpu_s": cpu, "read_b": read1 - read0, "wrote_b": wrote1 - wrote0,
            "listed": len(snapshot.listed), "described": len(snapshot.transactions)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ids", type=int, default=50_000)
    parser.add_argument("--tenant", type=int, default=500, help="ids the pattern selects: d x 10^k (the first ones)")
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--polls", type=int, default=7, help="measured polls per variant (after one warm-up)")
    parser.add_argument("--connections", type=int, default=8, help="fixture connections per broker")
    args = parser.parse_args()

    from kafka.admin import KafkaAdminClient

    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LabSettings, TransactionSettings

    lab_dir = tempfile.mkdtemp(prefix="txnwatch-listfilters-")
    lab = start_lab(LabSettings(brokers=args.brokers, proxy=False, transactions=TransactionSettings(
        max_timeout_ms=900_000, partition_verification_enable=False)), lab_dir, die_with_parent=True, quiet=True)
    try:
        admin = KafkaAdminClient(bootstrap_servers=lab.bootstrap_servers, client_id="listfilters-setup",
                                 request_timeout_ms=300_000)
        admin.describe_cluster()
        brokers = {b.node_id: (b.host, b.port) for b in admin._manager.cluster.brokers()}
        run = uuid.uuid4().hex[:6]
        scale = fixtures.Scale(ids=args.ids, open_txns=0, hanging=0, partitions=1, topics=1, groups=0,
                               offsets_per_group=0)
        leaders, _ = fixtures.create_topics(admin, scale, run)
        admin.close()
        started = time.monotonic()
        asyncio.run(fixtures.build_fixture(brokers, leaders, scale, run, 900_000, args.connections))
        print(f"{args.ids} ids given a producer id in {time.monotonic() - started:.0f} s", flush=True)

        # fixtures name ids bench-<run>-txn-00000...; the tenant's are the first --tenant of them.
        tenant = tenant_pattern(f"bench-{run}-txn-", args.tenant)
        only_topic = [f"{fixtures.TOPIC_PREFIX}{run}-0"]
        base = dict(name="bench", bootstrap_servers=lab.bootstrap_servers, request_timeout_ms=60_000,
                    topics_include=tuple(only_topic))
        variants = {"no pattern": (ClusterConnectionSettings(**base), False),  # type: ignore[arg-type]
                    "pattern, client-side": (ClusterConnectionSettings(**base, transactional_id_pattern=tenant),  # type: ignore[arg-type]
                                             True),
                    "pattern, server-side": (ClusterConnectionSettings(**base, transactional_id_pattern=tenant),  # type: ignore[arg-type]
                                             False)}
        conns = {name: ClusterConnection(settings) for name, (settings, _) in variants.items()}
        results: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        load_before = os.getloadavg()
        for name, conn in conns.items():
            _measure(conn, variants[name][1])  # warm-up: connections, metadata, API versions
        for _ in range(args.polls):
            for name, conn in conns.items():
                results[name].append(_measure(conn, variants[name][1]))
        load_after = os.getloadavg()
        for conn in conns.values():
            conn.close()
        report(args, tenant, results, load_before, load_after)
    finally:
        lab.down()


def tenant_pattern(prefix: str, tenant: int, width: int = 5) -> str:
    """A whole-id pattern for ``prefix`` + the zero-padded numbers 0 .. tenant-1, ``tenant`` = d x 10^k (d < 10):
    500 -> ``prefix00[0-4][0-9]{2}``, as a tenant's naming convention would select its ids."""
    digits = str(tenant)
    lead, zeros = int(digits[0]), len(digits) - 1
    if not 1 <= lead <= 9 or digits[1:] != "0" * zeros or zeros >= width:
        raise SystemExit(f"--tenant must be d x 10^k with d in 1..9 and fewer than {width} zeros, not {tenant}")
    first = "0" if lead == 1 else f"[0-{lead - 1}]"
    return prefix + "0" * (width - zeros - 1) + first + (f"[0-9]{{{zeros}}}" if zeros else "")


def report(args: argparse.Namespace, pattern: str, results: dict[str, list[dict[str, float]]],
           load_before: tuple[float, float, float], load_after: tuple[float, float, float]) -> None:
    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    print(f"\n{args.ids} transactional ids on {args.brokers} brokers; pattern {pattern!r} "
          f"(the tenant's {args.tenant}); {args.polls} polls per variant, alternating; medians")
    print(f"load average (1/5/15 min): before {load_before[0]:.1f}/{load_before[1]:.1f}/{load_before[2]:.1f}, "
          f"after {load_after[0]:.1f}/{load_after[1]:.1f}/{load_after[2]:.1f}; {os.cpu_count()} CPUs")
    header = (f"{'variant':<22} {'listed':>7} {'described':>9} {'wall s':>7} {'CPU s':>6} {'read KiB':>9} "
              f"{'wrote KiB':>9} {'wall x':>7} {'CPU x':>6} {'read x':>7}")
    print(header)
    print("-" * len(header))
    ref = "no pattern"
    for name in results:
        print(f"{name:<22} {med(name, 'listed'):>7.0f} {med(name, 'described'):>9.0f} {med(name, 'wall_s'):>7.3f} "
              f"{med(name, 'cpu_s'):>6.3f} {med(name, 'read_b') / 1024:>9.0f} {med(name, 'wrote_b') / 1024:>9.0f} "
              f"{med(name, 'wall_s') / med(ref, 'wall_s'):>7.3f} {med(name, 'cpu_s') / med(ref, 'cpu_s'):>6.3f} "
              f"{med(name, 'read_b') / med(ref, 'read_b'):>7.3f}")


if __name__ == "__main__":
    main()
