"""The transaction-log tail's decode + apply + store, before and after a change of the store (issue 24: the one
transition table of migration 0009 must not slow the tail down).

REV's code (``git archive`` of its ``service/``, ``alembic/`` and ``alembic.ini``) and this checkout's run in turns,
each round in fresh child processes on the same synthetic records (benchmarks/txnlog.py's TV2 stream: Ongoing,
Ongoing, PrepareCommit, CompleteCommit per transaction) against a fresh database each: a SQLite file, or with
``--postgres`` a throwaway PostgreSQL server (the tail's COPY path).  Printed per run: records/s (wall), the
child's CPU seconds and, on PostgreSQL, the server backend's CPU seconds, with the load average; then the ratio
of the medians (after / before).  Figures only, never asserted: the machine is shared.

    python benchmarks/txnlog_store.py --baseline REV                # SQLite
    python benchmarks/txnlog_store.py --baseline REV --postgres     # PostgreSQL (COPY)
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _backend_cpu_s(pid: int) -> float | None:
    """utime + stime of a process of this machine (the PostgreSQL backend serving the child)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child(url: str, transactions: int, batch: int) -> None:
    """One run on the code of ``--service`` (benchmarks/txnlog.py puts it first on sys.path)."""
    import importlib.util

    from sqlalchemy import text

    # benchmarks/txnlog.py: the records, and the decoder and detector of the code under test (it puts --service
    # first on sys.path as it loads).
    spec = importlib.util.spec_from_file_location("txnlog_bench", Path(__file__).resolve().parent / "txnlog.py")
    assert spec is not None and spec.loader is not None
    bench: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    from txnwatch.store import txnlog as store_txnlog
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.migrate import upgrade

    raw = list(bench.tv2_stream(5_000, transactions))
    upgrade(url)
    engine = make_engine(url, pool_size=1) if url.startswith("postgresql") else make_engine(url)
    sessions = make_sessionmaker(engine)
    cid = bench._register(sessions, "bench")
    pid = None
    if url.startswith("postgresql"):
        with sessions() as session:
            pid = session.scalar(text("SELECT pg_backend_pid()"))
    server0 = _backend_cpu_s(pid) if pid else None
    cpu0, wall0 = time.process_time(), time.perf_counter()
    state = bench.d.TxnLogState()
    for i in range(0, len(raw), batch):
        chunk = raw[i:i + batch]
        records = [r for r in (bench.decode_record(k, v, p, i + n, None) for n, (_, k, v, p) in enumerate(chunk))
                   if not isinstance(r, bench.RequestError)]
        state, findings = bench.d.apply(state, records)
        with sessions.begin() as session:
            store_txnlog.write_batch(session, cid, {p: i + n + 1 for n, (_, _, _, p) in enumerate(chunk)}, findings)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    server = None
    if pid:
        with sessions() as session:
            same = session.scalar(text("SELECT pg_backend_pid()")) == pid
        server1 = _backend_cpu_s(pid)
        server = server1 - server0 if same and server0 is not None and server1 is not None else None
    engine.dispose()
    print(json.dumps({"records": len(raw), "per_s": len(raw) / wall, "wall_s": wall, "cpu_s": cpu,
                      "server_cpu_s": server, "code": store_txnlog.__file__}))


def _extract(rev: str) -> Path:
    target = Path(tempfile.mkdtemp(prefix="txnlog-store-baseline-"))
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", rev, "service", "alembic",
                              "alembic.ini"], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return target


def _database(server: object | None, scratch: Path) -> str:
    if server is None:
        return f"sqlite:///{scratch / f'{uuid.uuid4().hex}.db'}"
    return server.create_database("bench_" + uuid.uuid4().hex[:12])  # type: ignore[attr-defined]  # tests.fixtures.postgres_server.PostgresServer


def compare(rev: str, rounds: int, transactions: int, batch: int, postgres: bool) -> None:
    baseline = _extract(rev)
    scratch = Path(tempfile.mkdtemp(prefix="txnlog-store-db-"))
    server = None
    if postgres:
        sys.path.insert(0, str(ROOT))
        from tests.fixtures.postgres_server import start_postgres

        server = start_postgres()
    sides = {rev: baseline, "this checkout": ROOT}
    try:
        backend = "PostgreSQL (COPY)" if postgres else "SQLite"
        print(f"== decode + apply + store on {backend}, before ({rev}) and after (this checkout): "
              f"{transactions * 4:,} records per run, batches of {batch:,}, {rounds} rounds, order alternating; "
              f"{os.cpu_count()} CPUs")
        figures: dict[str, list[dict[str, float]]] = {name: [] for name in sides}
        for n in range(rounds):
            for name in (list(sides) if n % 2 == 0 else list(reversed(sides))):
                env = dict(os.environ, TXNWATCH_ALEMBIC_DIR=str(sides[name]))
                out = subprocess.run([sys.executable, __file__, "--child", "--service", str(sides[name] / "service"),
                                      "--url", _database(server, scratch), "--transactions", str(transactions),
                                      "--batch", str(batch)], check=True, capture_output=True, text=True,
                                     env=env).stdout
                run = json.loads(out.strip().splitlines()[-1])
                assert Path(run["code"]).is_relative_to(sides[name]), run["code"]
                figures[name].append(run)
                server_cpu = f", server cpu {run['server_cpu_s']:.2f} s" if run["server_cpu_s"] is not None else ""
                print(f"   round {n + 1} {name:>15}: {run['per_s']:>8,.0f} records/s   cpu {run['cpu_s']:.2f} s"
                      f"{server_cpu}, wall {run['wall_s']:.2f} s   load {os.getloadavg()[0]:.2f}")
        med = {name: {k: statistics.median(r[k] for r in runs if r[k] is not None)
                      if any(r[k] is not None for r in runs) else float("nan")
                      for k in ("per_s", "cpu_s", "server_cpu_s")} for name, runs in figures.items()}
        before, after = med[rev], med["this checkout"]
        print(f"   median before: {before['per_s']:,.0f} records/s, cpu {before['cpu_s']:.2f} s, "
              f"server cpu {before['server_cpu_s']:.2f} s")
        print(f"   median after:  {after['per_s']:,.0f} records/s, cpu {after['cpu_s']:.2f} s, "
              f"server cpu {after['server_cpu_s']:.2f} s")
        print(f"   after / before: records/s {after['per_s'] / before['per_s']:.3f}, "
              f"client cpu {after['cpu_s'] / before['cpu_s']:.3f}, "
              f"server cpu {after['server_cpu_s'] / before['server_cpu_s']:.3f}   load now {os.getloadavg()[0]:.2f}")
    finally:
        if server is not None:
            server.stop()
            shutil.rmtree(server.root, ignore_errors=True)
        shutil.rmtree(baseline, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", metavar="REV", default="HEAD~1", help="git revision to compare with")
    parser.add_argument("--postgres", action="store_true", help="a throwaway PostgreSQL server instead of SQLite")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--transactions", type=int, default=12_500)
    parser.add_argument("--batch", type=int, default=10_000, help="records per applied batch (the tail's max poll)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--service", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.url, args.transactions, args.batch)
        return
    compare(args.baseline, args.rounds, args.transactions, args.batch, args.postgres)


if __name__ == "__main__":
    main()
