"""The transaction-log tail: through kafka-python against a lab broker's real log, and its synthetic hot path.

Default (``--lab``, issue 25's honest figures), in one run on a one-broker lab (Kafka 4.1.1 unless
``--kafka-version``), the log filled by Kafka's own Java TV2 producers (benchmarks/txnlog_lab.py):

1. **floor**: kafka-python alone reading the whole ``__transaction_state`` with the tail's fetch
   settings, nothing else (records/s, CPU s), pinned to CPU 1 (``taskset -c 1``) as the tail is; its figures
   start with its consumer connected and positioned, the tail's with its opening, so the ratios are also
   printed with the floor's opening (consumer, metadata, positions) counted as the tail's is;
2. **tail**: the daemon's ClusterTail over TransactionLogTail (fetch, decode, apply, store in SQLite)
   on the same log, records/s, CPU s and its ratio to the floor (goal >= 0.9x), twice: pinned to CPU 1
   alone like the floor, and on CPUs 0,1.  The floor is one thread on one core; the daemon's tail uses a
   second thread, its commit writer (collect/txnlog_writer.py), whose SQLite work runs off the GIL while
   the tail's thread fetches, decodes and applies the next records: the two-CPU line is the tail as the
   daemon runs it, the one-CPU line the cost on one core; and a third time on one CPU with its batch walk in
   Python (``txnlog_lab.py tail-python``: no ``kafka/_txnlog_walk.c``), the tail of an install without a C compiler;
3. **synthetic**: decode + apply of generated TV2 records in this process, no client (second line);
   Where the tail's CPU goes (py-spy on this log, 102,342 records, issue 25): about a quarter each in the
   fetch's walk and decode, in apply, and in the SQLite store (its executemany of one 20-column transitions
   row per record, half of which is the ``ix_transitions_txn`` btree); the cyclic GC, paused now for each
   step, was a fifth.  The decode reads each record where it lies in the batch (``decode_in``);
4. **trailing**: producers at the highest rate this machine's lab reaches while the tail, pinned to one
   core (``taskset -c 0``), follows from the log's end: p50/p99/max from the coordinator's append to the
   stored commit, the producers' transactions/s beside it (goal <= 2 s p99 at 10,000 transactions/s).

``--synthetic`` keeps the earlier figures (generated records fed to the decoder, never through a client):

1. records decoded and applied per second on one core (goal >= 100,000/s, i.e.
   >= 25,000 transaction-version-2 transactions/s at four records each), and the same
   with the database write of each batch (SQLite file, or ``--database-url``);
2. how far the daemon trails a simulated log at 10,000 transactions/s: the real
   ClusterTail fed by a log that releases records at their scheduled time;
3. RSS against the number of live transactional ids in the tail's state.

Records there are real TransactionLogValue v1 bytes (the layout Kafka 4 writes), built
here: a TV2 producer writes Ongoing, Ongoing (second partition), PrepareCommit with a
bumped epoch and CompleteCommit per transaction.

    python benchmarks/txnlog.py                 # lab: fill 200,000 records, floor, tail, trailing (~5 min)
    python benchmarks/txnlog.py --records 50000 --trail-seconds 20
    python benchmarks/txnlog_replay.py          # trailing a REPLAY at 10,000 transactions/s (its docstring)
    python benchmarks/txnlog.py --synthetic [--quick] [--profile] [--database-url URL]
    python benchmarks/txnlog.py --baseline REV  # first: decode+apply of REV's code and this checkout's,
                                                # side by side in alternating child processes
    python benchmarks/txnlog.py --baseline REV --compare-only --tagged
                                                # synthetic records as Kafka 4.3+ writes them: PreviousProducerId
                                                # (tag 0) on every value, which detection then reads

``--baseline REV`` extracts REV's ``service/`` (``git archive``) into a temporary directory and
runs the synthetic decode+apply there and here in turns (``--rounds``, the order alternating), each
in a fresh process on the same records, printing records/s from CPU time, CPU and wall seconds,
and the machine's load, then the ratio of the medians (here / REV).
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# Whose code is measured: ``--service DIR`` (a baseline's, in a --baseline child) or this checkout's.
sys.path.insert(0, sys.argv[sys.argv.index("--service") + 1] if "--service" in sys.argv[:-1]
                else str(Path(__file__).resolve().parents[1] / "service"))

from txnwatch.detect import txnlog as d
from txnwatch.kafka.txnlog import decode_record

try:
    from txnwatch.core.model import RequestError, TxnLogKind, TxnLogRecord, TxnState
except ModuleNotFoundError:  # a --baseline older than the move to core/ (issue 24)
    from txnwatch.model import RequestError, TxnLogKind, TxnLogRecord, TxnState  # type: ignore[no-redef,import-not-found,unused-ignore]  # where the names lived before the move

STATUS = {TxnState.EMPTY: 0, TxnState.ONGOING: 1, TxnState.PREPARE_COMMIT: 2, TxnState.PREPARE_ABORT: 3,
          TxnState.COMPLETE_COMMIT: 4, TxnState.COMPLETE_ABORT: 5}
RECORDS_PER_TXN = 4
TOPIC_NAME = "__transaction_state"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_key(tid: str) -> bytes:
    raw = tid.encode()
    return struct.pack(">hh", 0, len(raw)) + raw


def encode_value(state: TxnState, pid: int, epoch: int, partitions: dict[str, list[int]], last_ms: int,
                 start_ms: int, tv: int = 2, previous_pid: int | None = None) -> bytes:
    """TransactionLogValue version 1 (flexible), as Kafka 4 writes it (4.3+ with ``previous_pid``: tag 0)."""
    body = struct.pack(">hqhib", 1, pid, epoch, 60_000, STATUS[state])
    body += _uvarint(len(partitions) + 1)
    for topic, ids in partitions.items():
        raw = topic.encode()
        body += _uvarint(len(raw) + 1) + raw + _uvarint(len(ids) + 1) + b"".join(struct.pack(">i", i) for i in ids)
        body += b"\x00"
    body += struct.pack(">qq", last_ms, start_ms)
    tags = b"\x02\x02" + struct.pack(">h", tv)
    if previous_pid is None:
        return body + b"\x01" + tags
    return body + b"\x02\x00\x08" + struct.pack(">q", previous_pid) + tags


def tv2_stream(ids: int, transactions: int, start_ms: int = 1_800_000_000_000,
               per_second: float | None = None, tagged: bool = False) -> Iterator[tuple[float, bytes, bytes, int]]:
    """(scheduled arrival s, key, value, log partition), ids round-robin, one transaction at a time each;
    ``tagged``: each value carries PreviousProducerId, as Kafka 4.3+ writes it."""
    keys = [encode_key(f"bench-app-{i:06d}") for i in range(ids)]
    epochs = [0] * ids
    gap = 1.0 / per_second if per_second else 0.0
    for n in range(transactions):
        i = n % ids
        at = start_ms + n
        epoch = epochs[i]
        parts_one, parts_two = {"orders": [i % 12]}, {"orders": [i % 12], "payments": [i % 6]}
        arrival = n * gap
        was = 1000 + i if tagged else None
        yield arrival, keys[i], encode_value(TxnState.ONGOING, 1000 + i, epoch, parts_one, at, at, previous_pid=was), i % 50
        yield arrival, keys[i], encode_value(TxnState.ONGOING, 1000 + i, epoch, parts_two, at + 1, at, previous_pid=was), i % 50
        yield arrival, keys[i], encode_value(TxnState.PREPARE_COMMIT, 1000 + i, epoch + 1, parts_two, at + 2, at, previous_pid=was), i % 50
        yield arrival, keys[i], encode_value(TxnState.COMPLETE_COMMIT, 1000 + i, epoch + 1, {}, at + 3, at, previous_pid=was), i % 50
        epochs[i] = epoch + 1


def decode_all(raw: list[tuple[float, bytes, bytes, int]]) -> list[TxnLogRecord]:
    out = []
    for offset, (_, key, value, part) in enumerate(raw):
        rec = decode_record(key, value, part, offset, None)
        assert not isinstance(rec, RequestError)
        out.append(rec)
    return out


def throughput(raw: list[tuple[float, bytes, bytes, int]], batch: int) -> dict[str, float]:
    gc.collect()
    t0 = time.process_time()
    records = decode_all(raw)
    t1 = time.process_time()
    state = d.TxnLogState()
    for i in range(0, len(records), batch):
        state, findings = d.apply(state, records[i:i + batch])
    t2 = time.process_time()
    assert findings.counts.get("records") and sum(s.commits for s in state.ids.values()) == len(raw) // 4
    return {"decode": len(raw) / (t1 - t0), "apply": len(raw) / (t2 - t1), "both": len(raw) / (t2 - t0)}


def _sessions(url: str | None) -> tuple[object, object, str]:
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.migrate import upgrade

    if url is None:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='txnlog-bench-')}/bench.db"
    upgrade(url)
    engine = make_engine(url)
    return engine, make_sessionmaker(engine), url


def _register(sessions: object, name: str) -> int:
    from datetime import UTC, datetime

    from txnwatch.store.clusters import register_clusters

    with sessions.begin() as session:  # type: ignore[attr-defined]  # sessions is a sessionmaker built above; typed loosely in this script
        return register_clusters(session, {name: "h:9092"}, datetime.now(UTC))[name]


def with_store(raw: list[tuple[float, bytes, bytes, int]], batch: int, url: str | None) -> float:
    from txnwatch.store import txnlog as store_txnlog
    engine, sessions, _ = _sessions(url)
    cid = _register(sessions, "bench")
    t0 = time.perf_counter()
    state = d.TxnLogState()
    for i in range(0, len(raw), batch):
        chunk = raw[i:i + batch]
        records = [r for r in (decode_record(k, v, p, i + n, None) for n, (_, k, v, p) in enumerate(chunk))
                   if not isinstance(r, RequestError)]
        state, findings = d.apply(state, records)
        positions = {p: i + n + 1 for n, (_, _, _, p) in enumerate(chunk)}
        with sessions.begin() as session:  # type: ignore[attr-defined]  # sessions is a sessionmaker built above; typed loosely in this script
            store_txnlog.write_batch(session, cid, positions, findings)
    elapsed = time.perf_counter() - t0
    engine.dispose()  # type: ignore[attr-defined]  # engine is built above; typed loosely in this script
    return len(raw) / elapsed


class ScheduledLog:
    """A log whose records become readable at their scheduled time (the Kafka boundary, simulated)."""

    def __init__(self, raw: list[tuple[float, bytes, bytes, int]], started: float) -> None:
        self._raw, self._started, self._next = raw, started, 0
        self.released: list[float] = []

    def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
        now = time.perf_counter() - self._started
        end = self._next
        while end < len(self._raw) and self._raw[end][0] <= now and end - self._next < 20_000:
            end += 1
        if end == self._next:
            time.sleep(min(0.005, timeout_ms / 1000))
            return [], []
        out = []
        for offset in range(self._next, end):
            _, key, value, part = self._raw[offset]
            rec = decode_record(key, value, part, offset, None)
            assert not isinstance(rec, RequestError)
            out.append(rec)
        self._next = end
        return out, []

    def positions(self) -> dict[int, int]:
        return {0: self._next}

    def end_offsets(self) -> dict[int, int]:
        return {0: len(self._raw)}

    def close(self) -> None:
        pass

    @property
    def done(self) -> bool:
        return self._next == len(self._raw)


def trailing(rate_txn_s: int, seconds: float, ids: int, url: str | None) -> dict[str, float]:
    """Real ClusterTail + database on a log written at ``rate_txn_s``: how long from write to commit."""
    from txnwatch.collect.txnlog_tail import ClusterTail
    from txnwatch.core.views import LatestState
    from txnwatch.store import txnlog as store_txnlog

    raw = list(tv2_stream(ids, int(rate_txn_s * seconds), per_second=rate_txn_s))
    engine, sessions, _ = _sessions(url)
    _register(sessions, "bench")
    lags: list[float] = []
    original = store_txnlog.write_batch

    started = time.perf_counter()
    log = ScheduledLog(raw, started)

    def timed_write(session, cluster_id, positions, findings, *a, **kw):
        original(session, cluster_id, positions, findings, *a, **kw)
        session.commit()
        now = time.perf_counter() - started
        first = positions[0] - len(findings.transitions)
        lags.append(now - raw[first][0])   # the oldest record of the batch waited longest
        lags.append(now - raw[positions[0] - 1][0])

    store_txnlog.write_batch = timed_write
    try:
        tail = ClusterTail("bench", "h", lambda positions: log, sessions, LatestState(["bench"]),  # type: ignore[arg-type]  # a synthetic log that implements only what the tail calls
                           read_timeout_ms=5)
        deadline = started + seconds * 4 + 30
        while not log.done and time.perf_counter() < deadline:
            tail.step()
    finally:
        store_txnlog.write_batch = original
        engine.dispose()  # type: ignore[attr-defined]  # engine is built above; typed loosely in this script
    lags.sort()
    return {"p50": statistics.median(lags), "p99": lags[int(len(lags) * 0.99)], "max": lags[-1],
            "behind_at_end": len(raw) - log.positions()[0], "batches": len(lags) / 2}


def tail_throughput(raw: list[tuple[float, bytes, bytes, int]], per_fetch: int, url: str | None) -> float:
    """The real ClusterTail (apply -> store, commits as it decides) on already decoded records, as fast as it can:
    small fetches are what a caught-up consumer gets, and each used to cost a database transaction."""
    from txnwatch.collect.txnlog_tail import ClusterTail
    from txnwatch.core.views import LatestState

    records = decode_all(raw)
    engine, sessions, _ = _sessions(url)
    _register(sessions, "bench")

    class Fetches:
        def __init__(self) -> None:
            self.next = 0

        def read(self, timeout_ms: int = 0) -> tuple[list[TxnLogRecord], list[RequestError]]:
            out = records[self.next:self.next + per_fetch]
            self.next += len(out)
            return out, []

        def positions(self) -> dict[int, int]:
            return {0: self.next}

        def end_offsets(self) -> dict[int, int]:
            return {0: len(records)}

        def close(self) -> None:
            pass

    fetches = Fetches()
    tail = ClusterTail("bench", "h", lambda positions: fetches, sessions, LatestState(["bench"]),  # type: ignore[arg-type]
                       read_timeout_ms=0)
    t0 = time.perf_counter()
    while fetches.next < len(records):
        tail.step()
    tail.step()  # the empty read that commits the rest
    elapsed = time.perf_counter() - t0
    engine.dispose()  # type: ignore[attr-defined]
    return len(records) / elapsed


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def rss_by_ids(counts: list[int]) -> list[tuple[int, float]]:
    out = []
    for n in counts:
        gc.collect()
        before = rss_mb()
        records = [TxnLogRecord(f"rss-app-{i:07d}", i % 50, i, 0, TxnLogKind.VALUE, TxnState.COMPLETE_COMMIT, None,
                                i, 3, 60_000, (), 1_800_000_000_000 + i, 1_800_000_000_000, None, None, 2)
                   for i in range(n)]
        state, _ = d.apply(d.TxnLogState(), records)
        del records
        gc.collect()
        out.append((n, rss_mb() - before))
        del state
        gc.collect()
    return out


def child_figures(transactions: int, batch: int, tagged: bool = False) -> None:
    """One side of --baseline: figure 1 on this process's code, as one JSON line."""
    raw = list(tv2_stream(5_000, transactions, tagged=tagged))
    cpu0, wall0 = time.process_time(), time.perf_counter()
    rates = throughput(raw, batch)
    print(json.dumps({**rates, "cpu_s": time.process_time() - cpu0, "wall_s": time.perf_counter() - wall0,
                      "code": d.__file__}))


def _extract(rev: str) -> Path:
    """REV's service/ tree in a temporary directory (nothing of the checkout is changed)."""
    root = Path(__file__).resolve().parents[1]
    target = Path(tempfile.mkdtemp(prefix="txnlog-baseline-"))
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", rev, "service"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target / "service"


def compare(rev: str, rounds: int, transactions: int, batch: int, tagged: bool = False) -> None:
    """Decode+apply of REV's code and this checkout's, alternating, each round in two fresh processes."""
    baseline = _extract(rev)
    try:
        _compare({rev: baseline, "this checkout": Path(__file__).resolve().parents[1] / "service"}, rev, rounds,
                 transactions, batch, tagged)
    finally:
        shutil.rmtree(baseline.parent)


def _compare(sides: dict[str, Path], rev: str, rounds: int, transactions: int, batch: int,
             tagged: bool = False) -> None:
    print(f"== decode + apply, before ({rev}) and after (this checkout): {transactions * RECORDS_PER_TXN:,} records "
          f"per run{' (PreviousProducerId on each)' if tagged else ''}, {rounds} rounds, order alternating; "
          f"{os.cpu_count()} CPUs")
    load_before = os.getloadavg()
    figures: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
    for n in range(rounds):
        order = list(sides) if n % 2 == 0 else list(reversed(sides))
        for name in order:
            out = subprocess.run([sys.executable, __file__, "--child", "--service", str(sides[name]),
                                  "--transactions", str(transactions), "--batch", str(batch),
                                  *(["--tagged"] if tagged else [])],
                                 check=True, capture_output=True, text=True).stdout
            run = json.loads(out.strip().splitlines()[-1])
            assert Path(run["code"]).is_relative_to(sides[name]), run["code"]
            figures[name].append(run)
            print(f"   round {n + 1} {name:>15}: decode {run['decode']:>9,.0f}/s  apply {run['apply']:>9,.0f}/s  "
                  f"both {run['both']:>9,.0f}/s   cpu {run['cpu_s']:.2f} s, wall {run['wall_s']:.2f} s   "
                  f"load {os.getloadavg()[0]:.2f}")
    load_after = os.getloadavg()
    med = {name: {k: statistics.median(r[k] for r in runs) for k in ("decode", "apply", "both")}
           for name, runs in figures.items()}
    before, after = med[rev], med["this checkout"]
    for k in ("decode", "apply", "both"):
        print(f"   median {k:<6} before {before[k]:>9,.0f}/s  after {after[k]:>9,.0f}/s   "
              f"after/before {after[k] / before[k]:.3f}")
    print(f"   load average (1, 5, 15 min) before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")


def lab_figures(args: argparse.Namespace) -> None:
    """Floor, tail, synthetic and trailing, on one lab in one run (the module docstring)."""
    import importlib

    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LabSettings

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    lab_bench = importlib.import_module("txnlog_lab")  # benchmarks/ is no package: its sibling, by path
    work = Path(tempfile.mkdtemp(prefix="txnwatch-txnlog-bench-"))
    lab = start_lab(LabSettings(brokers=1, proxy=False, kafka_version=args.kafka_version), work / "lab",
                    die_with_parent=True, quiet=True)
    bootstrap = lab.bootstrap_servers
    try:
        loads = [os.getloadavg()[0]]
        have, took = lab_bench.fill(bootstrap, args.records, args.producers, work / "producers", args.kafka_version)
        loads.append(os.getloadavg()[0])
        print(f"== Kafka {args.kafka_version}, one broker; {TOPIC_NAME} filled by {args.producers} Java TV2 producers "
              f"(ProducerPerformance, a transaction per ms at most): {have:,} records in {took:.0f} s")
        print(f"   {'':<44} {'records':>9} {'wall s':>7} {'CPU s':>6} {'records/s':>10} {'per CPU-s':>10} {'load':>5}")
        # The floor is one thread on one core.  The tail runs as the daemon runs it: its commits on a writer
        # thread (collect/txnlog_writer.py) whose SQLite work runs off the GIL; shown on one core and on two.
        sides = {"floor": ("floor", "1", "floor: kafka-python alone, whole log, 1 CPU"),
                 "tail": ("tail", "1", "tail: fetch+decode+apply+store, 1 CPU"),
                 "tail2": ("tail", "0,1", "tail, its writer thread free on CPUs 0,1"),
                 # The same tail with its batch walk in Python (no kafka/_txnlog_walk.c): what the C walk gives.
                 "tailpy": ("tail-python", "1", "tail, its batch walk in Python, 1 CPU")}
        rows: dict[str, list[dict[str, float]]] = {side: [] for side in sides}
        for _ in range(args.runs):
            for side, (mode, pin, label) in sides.items():
                run = lab_bench.run_child(mode, bootstrap, have, pin=pin)
                run["load"] = os.getloadavg()[0]
                loads.append(run["load"])
                rows[side].append(run)
                print(f"   {label:<44} {run['records']:>9,.0f} {run['wall_s']:>7.2f} {run['cpu_s']:>6.2f} "
                      f"{run['records'] / run['wall_s']:>10,.0f} {run['records'] / run['cpu_s']:>10,.0f} "
                      f"{run['load']:>5.1f}")
                threads = sorted(run.get("threads", {}).items(), key=lambda kv: -kv[1])
                print("     CPU s by thread (with start-up): " + ", ".join(f"{n} {c:.2f}" for n, c in threads[:4])
                      + (f"; wall to the first records {run['to_first_s']:.2f} s, last commit after the last read "
                         f"{run['last_commit_s']:.2f} s" if "last_commit_s" in run else ""))
        best = {side: max(r["records"] / r["wall_s"] for r in runs) for side, runs in rows.items()}
        per_cpu = {side: max(r["records"] / r["cpu_s"] for r in runs) for side, runs in rows.items()}
        for side, label in (("tail", "one CPU"), ("tail2", "two CPUs")):
            # The floor's wall starts with its consumer connected and positioned; the tail's includes opening
            # (stored positions, consumer, metadata): also shown from its first records on.
            opened = max(r["records"] / max(1e-9, r["wall_s"] - r.get("to_first_s", 0.0)) for r in rows[side])
            print(f"   tail ({label}) / floor, best records/s: {best[side] / best['floor']:.2f}x "
                  f"(from the tail's first records: {opened / best['floor']:.2f}x)   per CPU-s: "
                  f"{per_cpu[side] / per_cpu['floor']:.2f}x   (goal >= 0.9x)")
        print(f"   tail with the compiled batch walk / with the Python walk (one CPU): best records/s "
              f"{best['tail'] / best['tailpy']:.2f}x, per CPU-s {per_cpu['tail'] / per_cpu['tailpy']:.2f}x; the "
              f"Python walk / floor per CPU-s {per_cpu['tailpy'] / per_cpu['floor']:.2f}x")
        # The same, the floor's opening counted as the tail's is (its consumer, metadata and positions).
        floors = rows["floor"]
        equal_best = max(r["records"] / (r["wall_s"] + r.get("opening_wall_s", 0.0)) for r in floors)
        equal_cpu = max(r["records"] / (r["cpu_s"] + r.get("opening_cpu_s", 0.0)) for r in floors)
        print(f"   with the floor's opening counted as the tail's is (consumer, metadata, positions: "
              f"{min(r.get('opening_wall_s', 0.0) for r in floors):.2f} s wall, "
              f"{min(r.get('opening_cpu_s', 0.0) for r in floors):.2f} CPU-s): tail / floor, best records/s "
              + ", ".join(f"{label} {best[side] / equal_best:.2f}x" for side, label in (("tail", "one CPU"),
                                                                                    ("tail2", "two CPUs")))
              + f"; per CPU-s {per_cpu['tail'] / equal_cpu:.2f}x")
        raw = list(tv2_stream(5_000, 25_000))
        synthetic = throughput(raw, args.batch)
        print(f"   synthetic decode+apply, no client, {len(raw):,} generated records: {synthetic['both']:,.0f} "
              f"records/s (decode {synthetic['decode']:,.0f}/s, apply {synthetic['apply']:,.0f}/s, CPU time)")
        producers = lab_bench.start_producers(bootstrap, args.trail_producers, work / "producers", args.kafka_version,
                                              tag="trail", duration_ms=1)
        try:
            time.sleep(10.0)  # the JVMs' start and first transactions
            before = lab_bench.log_records(bootstrap)
            run = lab_bench.run_child("trail", bootstrap, args.trail_seconds, pin="0")
            written = lab_bench.log_records(bootstrap) - before
        finally:
            lab_bench.stop_producers(producers)
        loads.append(os.getloadavg()[0])
        records_s = written / run["wall_s"]
        per_txn = 3  # TV2: Ongoing (added by the partition leader), PrepareCommit, CompleteCommit
        print(f"== trailing: {args.trail_producers} Java TV2 producers wrote {records_s:,.0f} records/s "
              f"(~{records_s / per_txn:,.0f} transactions/s at {per_txn} records each) for {run['wall_s']:.0f} s; "
              f"the tail pinned to CPU 0 (taskset -c 0; the broker and producers share both CPUs)")
        if run.get("stored"):
            print(f"   append-to-stored p50 {run['p50']:.2f} s, p99 {run['p99']:.2f} s, max {run['max']:.2f} s over "
                  f"{run['stored']:,} records; tail CPU {run['cpu_s']:.1f} s in {run['wall_s']:.1f} s wall "
                  f"({run['cpu_s'] / run['wall_s']:.0%} of a core); behind at the end: {run['behind_at_end']:,} "
                  f"records   (goal p99 <= 2 s at 10,000 transactions/s: shown here at "
                  f"{records_s / per_txn:,.0f}/s only)")
        else:
            print(f"   nothing stored: {run}")
        print(f"   load average (1 min) during the run: {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    finally:
        lab.down()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--synthetic", action="store_true", help="the synthetic figures only (no lab)")
    parser.add_argument("--records", type=int, default=200_000, help="lab: fill the log to this many records")
    parser.add_argument("--producers", type=int, default=4, help="lab: Java producers filling the log")
    parser.add_argument("--runs", type=int, default=2, help="lab: reads of each side, alternating")
    parser.add_argument("--trail-producers", type=int, default=4, help="lab: Java producers while trailing")
    parser.add_argument("--trail-seconds", type=float, default=30.0)
    parser.add_argument("--kafka-version", default="4.1.1")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--database-url", default=None, help="default: a temporary SQLite file")
    parser.add_argument("--batch", type=int, default=10_000, help="records per applied batch (the tail's max poll)")
    parser.add_argument("--baseline", metavar="REV", help="first compare decode+apply with REV's code (git revision)")
    parser.add_argument("--rounds", type=int, default=7, help="--baseline: runs of each side")
    parser.add_argument("--compare-only", action="store_true", help="--baseline: stop after the comparison")
    parser.add_argument("--tagged", action="store_true", help="synthetic records carry PreviousProducerId (4.3+)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--service", help=argparse.SUPPRESS)
    parser.add_argument("--transactions", type=int, default=25_000, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_figures(args.transactions, args.batch, args.tagged)
        return
    if args.baseline:
        compare(args.baseline, args.rounds, 10_000 if args.quick else 25_000, args.batch, args.tagged)
        if args.compare_only:
            return
    if not args.synthetic:
        lab_figures(args)
        return
    transactions = 25_000 if args.quick else 100_000
    raw = list(tv2_stream(5_000, transactions, tagged=args.tagged))
    print(f"== decode + apply, one core: {len(raw):,} records ({transactions:,} TV2 transactions, 5,000 ids)")
    best = max((throughput(raw, args.batch) for _ in range(3)), key=lambda r: r["both"])
    print(f"   decode {best['decode']:>10,.0f} records/s")
    print(f"   apply  {best['apply']:>10,.0f} records/s")
    print(f"   both   {best['both']:>10,.0f} records/s = {best['both'] / RECORDS_PER_TXN:,.0f} transactions/s   "
          f"(goal >= 100,000 records/s: {best['both'] / 100_000:.2f}x)")
    stored = with_store(raw[: len(raw) // (2 if args.quick else 4)], args.batch, args.database_url)
    print(f"   with the database write per batch: {stored:,.0f} records/s = {stored / RECORDS_PER_TXN:,.0f} "
          "transactions/s")
    for per_fetch in (500, 5_000):
        rate = tail_throughput(raw[: len(raw) // (4 if args.quick else 2)], per_fetch, args.database_url)
        print(f"   the tail's apply + store at {per_fetch:,} records per fetch: {rate:,.0f} records/s")
    seconds = 5.0 if args.quick else 15.0
    print(f"== trailing the log at 10,000 transactions/s ({RECORDS_PER_TXN * 10_000:,} records/s) for {seconds:.0f} s")
    lag = trailing(10_000, seconds, 5_000, args.database_url)
    print(f"   write-to-commit p50 {lag['p50']:.2f} s, p99 {lag['p99']:.2f} s, max {lag['max']:.2f} s over "
          f"{lag['batches']:.0f} batches; records behind at the end: {lag['behind_at_end']:,.0f}   "
          f"(goal p99 <= 2 s: {'met' if lag['p99'] <= 2 else 'missed'})")
    counts = [10_000, 100_000] if args.quick else [10_000, 100_000, 500_000]
    print("== RSS of the tail's state against live transactional ids")
    for n, mb in rss_by_ids(counts):
        print(f"   {n:>8,} ids: +{mb:7.1f} MB  ({mb * 1e6 / n:,.0f} bytes/id)")
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.enable()
        throughput(raw[:200_000], args.batch)
        profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(12)


if __name__ == "__main__":
    main()
