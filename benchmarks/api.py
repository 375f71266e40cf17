"""REST API reads at 200 requests/s from `txnwatch run` on PostgreSQL with polls running (issue 25's case).

A throwaway PostgreSQL (Debian's binaries, as the tests start it), a one-broker Kafka lab filled by
benchmarks/fixture.py (400 transactional ids, 60 open, 6 hanging; 600 partitions over 30 topics; 200 groups
committing on 10 partitions each; ``--quick``: a third of that), and ``txnwatch run`` on its defaults against both
(15 s polls, the transaction-log tail, the API in the daemon's process, the answer cache, the metrics port).
After ``--warmup-polls`` polls:

1. ``--burn N`` processes each spin one CPU (the issue's "one CPU of other work": ``--burn 1``);
2. the daemon's and PostgreSQL's CPU are measured for ``--idle`` seconds with no requests (polls, the tail and the
   render go on): their idle rate;
3. vegeta (github.com/tsenart/vegeta, an **open-loop constant-rate** generator: a request leaves every 1/rate s
   whether or not the others returned, so queueing shows as latency) sends ``--rate`` req/s for ``--seconds`` over
   nine list endpoints at their default page size, round-robin;
4. each list endpoint alone at ``--each-rate`` req/s for ``--each-seconds`` (the cached ones, which miss at most
   once a second and once per generation, and those never cached: the reports and verification).

Printed: p50/p95/p99/max, errors, the achieved rate, per-endpoint p50/p99, API CPU per request (the daemon's CPU
over the window minus its idle rate, divided by the requests), PostgreSQL's likewise, the slow requests sent while
a poll ran and in how many distinct seconds, the load and the other work on the machine.  Latency on a shared
machine is the machine's: CPU per request is the figure to compare.

vegeta is taken from PATH or Go's bin directory; when missing and ``go`` is on PATH it is installed with
``go install github.com/tsenart/vegeta/v12@v12.13.0`` (the Go module proxy).

    .venv/bin/python benchmarks/api.py --burn 1     # the issue's case: 60 s at 200 req/s, one CPU burnt (~5 min)
    .venv/bin/python benchmarks/api.py --quick      # a smaller lab, 20 s
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks import fixture, harness
from benchmarks.harness import Meter, Window, pct
from tests.fixtures.postgres_server import start_postgres

TARGET_P99_MS = 50.0
CLUSTER = "apilab"
#: The list endpoints at their default page size, as a dashboard or a script reads them.
ENDPOINTS = ["/api/v1/transactions", "/api/v1/transactions?min_age_seconds=60", "/api/v1/transactions?hanging=true",
             "/api/v1/hanging", "/api/v1/lso-stalls", "/api/v1/partitions", "/api/v1/consumer-groups",
             "/api/v1/alerts", "/api/v1/clusters"]
#: List endpoints the answer cache never keeps (written by the pipeline, or asking the brokers' own figures).
UNCACHED = [*(f"/api/v1/reports/{CLUSTER}/{r}" for r in ("transactions", "topics", "lag", "offenders")),
            "/api/v1/verification"]
FULL = fixture.Scale(ids=400, open_txns=60, hanging=6, partitions=600, topics=30, groups=200, offsets_per_group=10)
QUICK = fixture.Scale(ids=150, open_txns=20, hanging=3, partitions=200, topics=10, groups=60, offsets_per_group=5)
VEGETA_MODULE = "github.com/tsenart/vegeta/v12@v12.13.0"


def vegeta_binary() -> str | None:
    """vegeta on PATH or in Go's bin directory; installed through the Go module proxy when go is here."""
    found = shutil.which("vegeta")
    if found or not shutil.which("go"):
        return found
    gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True).stdout.strip()
    candidate = Path(gopath.split(os.pathsep)[0] if gopath else Path.home() / "go") / "bin" / "vegeta"
    if not candidate.exists():
        print(f"installing {VEGETA_MODULE} with go install ...", flush=True)
        if subprocess.run(["go", "install", VEGETA_MODULE]).returncode != 0:
            return None
    return str(candidate) if candidate.exists() else None


@dataclass
class Results:
    """vegeta's results, one row per request."""

    sent_s: list[float] = field(default_factory=list)  # unix seconds
    status: list[int] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    url: list[str] = field(default_factory=list)
    error: list[str] = field(default_factory=list)
    generator_cpu_s: float = 0.0  # vegeta's own (attack and encode)

    def ok(self) -> list[float]:
        return [lat for lat, code in zip(self.latency_ms, self.status, strict=True) if code == 200] or [0.0]

    def errors(self) -> Counter[str]:
        """Errors without their addresses and ports, so that errors of one kind count together."""
        kinds: Counter[str] = Counter()
        for code, error in zip(self.status, self.error, strict=True):
            if code != 200:
                kinds[f"HTTP {code}" if code else next((k for k in ("Client.Timeout exceeded", "connection reset",
                                                                    "connection refused", "EOF") if k in error),
                                                       error.rsplit(": ", 1)[-1] or "error")] += 1
        return kinds


def attack(binary: str, base: str, paths: list[str], rate: float, seconds: float) -> Results:
    """One constant-rate attack, every request's row decoded from ``vegeta encode --to csv``."""
    targets = "".join(f"GET {base}{path}\n\n" for path in paths)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([binary, "attack", f"-rate={rate:g}/s", f"-duration={seconds:g}s", "-timeout=10s",
                           "-max-body=0", "-workers=16"], input=targets.encode(), capture_output=True, check=True)
    encoded = subprocess.run([binary, "encode", "--to", "csv"], input=done.stdout, capture_output=True,
                             check=True).stdout.decode()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = Results(generator_cpu_s=after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    # timestamp (ns), code, latency (ns), bytes out, bytes in, error, body, attack name, seq, method, url, headers
    for row in csv.reader(io.StringIO(encoded)):
        out.sent_s.append(int(row[0]) / 1e9)
        out.status.append(int(row[1]))
        out.latency_ms.append(int(row[2]) / 1e6)
        out.error.append(row[5])
        out.url.append(row[10][len(base):])
    return out


def per_request(window: Window, idle: Window, pid: int, requests: int) -> float:
    """CPU ms per request of ``pid``'s tree above its idle rate."""
    above = window.cpu_s[pid] - idle.cpu_s[pid] / idle.wall_s * window.wall_s
    return max(0.0, above) * 1000 / max(requests, 1)


def report(res: Results, window: Window, idle: Window, daemon: harness.Daemon, postgres: int, rate: float) -> None:
    errors, ok = res.errors(), res.ok()
    span = max(res.sent_s) - min(res.sent_s) if len(res.sent_s) > 1 else 0.0
    p99 = pct(ok, .99)
    print(f"{len(res.status)} requests offered at {rate:g} req/s, achieved {len(res.status) / max(span, 1e-9):.0f} "
          f"req/s; errors {sum(errors.values())} {dict(errors) if errors else ''}")
    print(f"  latency p50 {pct(ok, .5):.1f}  p95 {pct(ok, .95):.1f}  p99 {p99:.1f}  max {max(ok):.1f} ms; p99/target "
          f"{p99 / TARGET_P99_MS:.2f} ({'met' if p99 <= TARGET_P99_MS and not errors else 'MISSED'})")
    print(f"  API CPU {per_request(window, idle, daemon.pid, len(res.status)):.2f} ms/request (daemon "
          f"{window.cpu_s[daemon.pid]:.1f} CPU-s in {window.wall_s:.0f} s, idle rate "
          f"{idle.cpu_s[daemon.pid] / idle.wall_s:.3f} CPU-s/s), PostgreSQL "
          f"{per_request(window, idle, postgres, len(res.status)):.2f} ms/request; load {window.load[0]:.1f} -> "
          f"{window.load[1]:.1f}; vegeta {res.generator_cpu_s * 1000 / max(len(res.status), 1):.2f} ms/request; "
          f"other work {window.other_cpus():.2f} of {os.cpu_count()} CPUs")
    slow = [at for at, lat in zip(res.sent_s, res.latency_ms, strict=True) if lat > TARGET_P99_MS]
    if slow:
        polls = daemon.polls()
        seconds = sorted({int(at - min(res.sent_s)) for at in slow})
        print(f"  over {TARGET_P99_MS:.0f} ms: {len(slow)}, {sum(harness.in_a_poll(at, 0, polls) for at in slow)} of "
              f"them sent while a poll ran; in {len(seconds)} distinct seconds ({', '.join(map(str, seconds[:15]))}"
              f"{' ...' if len(seconds) > 15 else ''})")
    by: dict[str, list[float]] = defaultdict(list)
    for url, lat, code in zip(res.url, res.latency_ms, res.status, strict=True):
        if code == 200:
            by[url].append(lat)
    harness.rows(["  endpoint", "n", "p50 ms", "p99 ms", "max ms"],
                 [[f"  {u}", len(v), f"{pct(v, .5):.1f}", f"{pct(v, .99):.1f}", f"{max(v):.1f}"] for u, v in sorted(by.items())],
                 first=50, width=8)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=float, default=200)
    parser.add_argument("--seconds", type=float, help="measured window (default 60; --quick 20)")
    parser.add_argument("--burn", type=int, default=0, help="processes spinning one CPU each during the window")
    parser.add_argument("--idle", type=float, help="seconds of the daemon's idle CPU measured first (30; --quick 15)")
    parser.add_argument("--each-rate", type=float, default=50, help="each endpoint alone at this rate ...")
    parser.add_argument("--each-seconds", type=float, help="... for this long (default 10, --quick 4; 0 skips)")
    parser.add_argument("--warmup-polls", type=int, default=3, help="daemon polls before measuring")
    parser.add_argument("--quick", action="store_true", help="a smaller lab and shorter windows")
    args = parser.parse_args()
    seconds, idle_s = args.seconds or (20 if args.quick else 60), args.idle or (15 if args.quick else 30)
    each_s = args.each_seconds if args.each_seconds is not None else (4 if args.quick else 10)
    vegeta = vegeta_binary()
    if vegeta is None:
        print("vegeta is needed (go on PATH installs it; or put vegeta on PATH)")
        return 2
    started, loads = time.perf_counter(), harness.Loads()
    server = start_postgres()
    work = Path(tempfile.mkdtemp(prefix="txnwatch-bench-api-"))
    daemon, burning = None, []
    try:
        with harness.Lab(verification=False, txn_max_timeout_ms=fixture.TXN_TIMEOUT_MS) as lab:
            url = server.create_database("apibench")
            postgres = int((server.root / "data" / "postmaster.pid").read_text().split()[0])
            fixture.fill(lab.bootstrap, QUICK if args.quick else FULL)
            daemon = harness.Daemon.start(work, [{"name": CLUSTER, "bootstrap_servers": lab.bootstrap.split(",")}],
                                          settings={"database_url": url}, migrate=True)
            daemon.wait(polls=args.warmup_polls, deadline_s=600)
            for path in ENDPOINTS + UNCACHED:
                answer = httpx.get(daemon.url(path), timeout=10)
                body = answer.json()
                items = body.get("items") if isinstance(body, dict) else body
                print(f"  {path:<48} HTTP {answer.status_code}, {len(items) if isinstance(items, list) else '-'} items, "
                      f"{len(answer.content):,} bytes")
            burning = harness.burners(args.burn)
            with Meter(daemon.pid, postgres) as idle_meter:
                time.sleep(idle_s)
            assert idle_meter.result is not None
            idle = idle_meter.result
            loads.seen.extend(idle.load)
            print(f"\n=== vegeta, open loop, {args.rate:g} req/s for {seconds:g} s over {len(ENDPOINTS)} list endpoints, "
                  f"{args.burn} CPU(s) burnt", flush=True)
            with Meter(daemon.pid, postgres) as meter:
                res = attack(vegeta, daemon.url(), ENDPOINTS, args.rate, seconds)
            assert meter.result is not None
            loads.seen.extend(meter.result.load)
            report(res, meter.result, idle, daemon, postgres, args.rate)
            if each_s > 0:
                print(f"\n=== each list endpoint alone, {args.each_rate:g} req/s for {each_s:g} s")
                body = []
                for path in ENDPOINTS + UNCACHED + ["/healthz"]:
                    with Meter(daemon.pid, postgres) as one:
                        alone = attack(vegeta, daemon.url(), [path], args.each_rate, each_s)
                    assert one.result is not None
                    n = len(alone.status)
                    body.append([f"  {path}", f"{per_request(one.result, idle, daemon.pid, n):.2f}",
                                 f"{per_request(one.result, idle, postgres, n):.2f}", f"{pct(alone.ok(), .5):.1f}",
                                 f"{pct(alone.ok(), .99):.1f}", sum(alone.errors().values())])
                harness.rows(["  endpoint", "API ms/req", "PG ms/req", "p50 ms", "p99 ms", "errors"], body, first=50,
                             width=11)
        print(f"\nwhole run {time.perf_counter() - started:.0f} s; {harness.machine_line(loads)}")
        return 0
    finally:
        for proc in burning:
            proc.kill()
            proc.wait()
        if daemon is not None:
            daemon.stop()
        server.stop()
        shutil.rmtree(server.root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
