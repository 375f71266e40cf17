"""What the stream's per-id index costs the tail's store, and what dropping it would cost the per-id history.

Issue 25 asked whether a migration (0010) dropping or replacing ``ix_transitions_txn`` on the stream's rows
would bring the tail nearer the client floor.  This measures it on SQLite, through the store's own hot path
(``store.txnlog.stream_rows`` + ``_stage``: the multi-row INSERTs the tail's writer thread runs, with the
daemon's pragmas), on a database migrated to head, with three index layouts applied by hand afterwards:

* ``today``: the schema as migrated: (cluster_id, head of transactional_id, at_ms) over every row;
* ``no-txn-index``: that index dropped (the per-id history then reads the whole table);
* ``by-partition``: the id index kept for polled rows only, and the stream's rows indexed by
  (cluster_id, log_partition, at_ms) instead: an id's records all lie in one partition of
  ``__transaction_state``, so its history reads that partition's rows newest first, keeping its own.

Each layout runs in a fresh child process per round (order alternating), for a few ids (as the lab's Java
producers write: benchmarks/txnlog.py) and for many (as benchmarks/txnlog_replay.py replays).  Printed per
run: the store's CPU microseconds per row (the insert only, commits of ``--commit`` rows), wall, and how long
the per-id history takes (``queries.transitions`` as the API's timeline reads it, or the by-partition query)
for a busy id and for an idle one whose three rows are the oldest of its partition, with the load average.
Figures only, never asserted: the machine is shared.

    python benchmarks/txnlog_index.py                       # 300,000 rows, 4 and 1,000 ids, 2 rounds
    python benchmarks/txnlog_index.py --rows 1000000 --ids 1000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parents[1]))  # benchmarks.scratch_store (appended: never ahead of a baseline)

from txnwatch.core.vocabulary import TxnState
from txnwatch.detect.txnlog import COMMIT

#: The index layouts compared: the DDL applied after migrating to head.
LAYOUTS: dict[str, tuple[str, ...]] = {
    "today": (),
    "no-txn-index": ("DROP INDEX ix_transitions_txn",),
    "by-partition": (
        "DROP INDEX ix_transitions_txn",
        "CREATE INDEX ix_transitions_txn ON transitions (cluster_id, substr(transactional_id, 1, 200), at_ms) "
        "WHERE source = 'poll'",
        "CREATE INDEX ix_transitions_log ON transitions (cluster_id, log_partition, at_ms) "
        "WHERE source = 'transaction_log' AND anomaly IS NULL"),
}
PARTITIONS = 50
HISTORY_LIMIT = 100
#: A TV2 transaction's records as the coordinator writes them (4.1.1: three per transaction), (from, to).
_ONGOING, _PREPARE, _DONE = TxnState.ONGOING.value, TxnState.PREPARE_COMMIT.value, TxnState.COMPLETE_COMMIT.value
_STEPS = ((_DONE, _ONGOING), (_ONGOING, _PREPARE), (_PREPARE, _DONE))


def _transitions(ids: int, rows: int, idle: str) -> list[Any]:
    """LogTransition tuples (its field order): the idle id's three records first, then ``rows`` taking turns
    over ``ids`` ids; id i writes to partition i % PARTITIONS (the idle id to partition 0), offsets dense."""
    from txnwatch.detect.txnlog import LogTransition

    t0, offsets = 1_760_000_000_000, [0] * PARTITIONS
    out = []

    def one(tid: str, partition: int, n: int, at_ms: int) -> None:
        was, now = _STEPS[n % 3]
        out.append(LogTransition(tid, at_ms, partition, offsets[partition], was, now, 7_000 + n % 97, n // 3 % 30_000,
                                 7_000 + n % 97, n // 3 % 30_000, 60_000, at_ms - 5,
                                 (("orders", n % 12), ("payments", n % 12)),
                                 (COMMIT,) if now == _DONE else (), 5 if now == _DONE else None,
                                 2))
        offsets[partition] += 1

    for n in range(3):
        one(idle, 0, n, t0 + n)
    names = [f"producer-{i:05d}" for i in range(ids)]
    for n in range(rows):
        i = n % ids
        one(names[i], i % PARTITIONS, n // ids, t0 + 1_000 + n // 30)  # ~30,000 records a second
    return out


def _history(session: Any, layout: str, cid: int, tid: str, partition: int) -> tuple[int, float]:
    """(rows, seconds) of the id's newest HISTORY_LIMIT transitions, as the layout would answer them."""
    from sqlalchemy import text

    from txnwatch.store import queries

    started = time.perf_counter()
    if layout != "by-partition":
        found = len(queries.transitions(session, cid, tid, HISTORY_LIMIT))
    else:
        found = len(session.execute(text(
            "SELECT * FROM transitions WHERE cluster_id = :c AND source = 'transaction_log' AND anomaly IS NULL "
            "AND log_partition = :p AND transactional_id = :t ORDER BY at_ms DESC, id DESC LIMIT :n"),
            {"c": cid, "p": partition, "t": tid, "n": HISTORY_LIMIT}).all())
    return found, time.perf_counter() - started


def child(layout: str, ids: int, rows: int, commit: int) -> None:
    from sqlalchemy import text

    from benchmarks.scratch_store import scratch_store
    from txnwatch.store import txnlog as store_txnlog

    engine, sessions, cid = scratch_store("txnlog-index-bench-", bootstrap="h:9092")
    with sessions.begin() as session:
        for ddl in LAYOUTS[layout]:
            session.execute(text(ddl))
    idle = "idle-producer"
    transitions = _transitions(ids, rows, idle)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for start in range(0, len(transitions), commit):
        with sessions.begin() as session:
            rows_ = store_txnlog.stream_rows(cid, 1_760_000_000_000, transitions[start:start + commit])
            store_txnlog._stage(session, rows_)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    with sessions() as session:
        _history(session, layout, cid, "producer-00000", 0)  # warm the statement and the pages once
        busy = _history(session, layout, cid, "producer-00000", 0)
        quiet = _history(session, layout, cid, idle, 0)
    engine.dispose()
    print(json.dumps({"rows": len(transitions), "cpu_s": cpu, "wall_s": wall, "busy": busy, "idle": quiet}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=300_000, help="stream rows per run")
    parser.add_argument("--ids", type=int, nargs="+", default=[4, 1_000], help="transactional ids taking turns")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--commit", type=int, default=20_000, help="rows per committed transaction")
    parser.add_argument("--layouts", nargs="+", default=list(LAYOUTS), choices=list(LAYOUTS))
    parser.add_argument("--child", nargs=2, metavar=("LAYOUT", "IDS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.rows, args.commit)
        return
    print(f"== the stream's insert on SQLite by index layout: {args.rows:,} rows per run, commits of "
          f"{args.commit:,}, {args.rounds} rounds (order alternating), {os.cpu_count()} CPUs; history = the id's "
          f"newest {HISTORY_LIMIT} transitions")
    for ids in args.ids:
        figures: dict[str, list[dict[str, Any]]] = {layout: [] for layout in args.layouts}
        for n in range(args.rounds):
            for layout in (args.layouts if n % 2 == 0 else list(reversed(args.layouts))):
                out = subprocess.run([sys.executable, __file__, "--child", layout, str(ids), "--rows", str(args.rows),
                                      "--commit", str(args.commit)], check=True, capture_output=True, text=True).stdout
                run = json.loads(out.strip().splitlines()[-1])
                figures[layout].append(run)
                print(f"   {ids:>5,} ids {layout:<13} insert {run['cpu_s'] * 1e6 / run['rows']:5.2f} us/row CPU "
                      f"({run['cpu_s']:.2f} s, wall {run['wall_s']:.2f} s); history: busy id {run['busy'][0]} rows "
                      f"{run['busy'][1] * 1000:7.2f} ms, idle id {run['idle'][0]} rows {run['idle'][1] * 1000:7.2f} ms"
                      f"   load {os.getloadavg()[0]:.2f}")
        base = statistics.median(r["cpu_s"] for r in figures[args.layouts[0]])
        print(f"   {ids:>5,} ids, median insert CPU against {args.layouts[0]}: " + ", ".join(
            f"{layout} {statistics.median(r['cpu_s'] for r in runs) / base:.2f}x" for layout, runs in figures.items()))


if __name__ == "__main__":
    main()
