"""A 10-minute cluster outage pages once and resolves once (issue 15, defect 1), at production settings.

Starts a one-broker lab cluster, txnwatch in-process with its defaults (15 s polls, the
5-10-20 … 300 s backoff, ``cluster_down`` ``for: 120s``) paging a local fake PagerDuty, cuts
every client connection at the lab's proxy for ``--minutes``, then lets the cluster back.
Prints when the page went out (target: ≤ for + one interval = 135 s), how long txnwatch stayed
blind after the return (target: ≤ one interval = 15 s) and the PagerDuty events (target:
exactly one trigger and one resolve).  The suite runs the same path with a 1 s interval and
an 8 s ``for:`` (tests/faults/test_cluster_outage_lab.py).

    .venv/bin/python benchmarks/cluster_outage.py [--minutes 10]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "service")]

from tests.alerting.fake_pagerduty import fake_pagerduty  # noqa: E402
from tests.fixtures.daemon import start_daemon, wait_for  # noqa: E402
from txnwatch.lab import faults  # noqa: E402
from txnwatch.lab.cluster import start_lab  # noqa: E402
from txnwatch.lab.settings import LabSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="txnwatch-outage-"))
    lab = start_lab(LabSettings(brokers=1), work / "lab", die_with_parent=True, quiet=True)
    try:
        with fake_pagerduty() as pd:
            d = start_daemon(database_url=f"sqlite:///{work / 'db.sqlite'}",
                             clusters=[dict(name="lab", bootstrap_servers=lab.bootstrap_servers)],
                             pagerduty=dict(enabled=True, routing_key="bench-key", events_url=pd.url))
            interval = d.settings.poll_interval_seconds
            try:
                wait_for(lambda: (v := d.runtime.state.get("lab")) and v.up, 120, what="first poll")
                cut = faults.cut_connections(lab, None, block=True)
                cut_at = time.monotonic()
                paged_at = None
                while time.monotonic() - cut_at < args.minutes * 60:
                    if paged_at is None and any(a == "trigger" for a, _ in pd.actions()):
                        paged_at = time.monotonic() - cut_at
                    time.sleep(1)
                failures = d.runtime.state.get("lab").consecutive_failures  # type: ignore[union-attr]  # the cluster's view exists once the daemon has polled it
                cut.clear()
                back_at = time.monotonic()
                wait_for(lambda: (v := d.runtime.state.get("lab")) and v.up, 600, what="the cluster polled again")
                blind = time.monotonic() - back_at
                wait_for(lambda: any(a == "resolve" for a, _ in pd.actions()), 120, what="the resolve")
                time.sleep(2 * interval)  # anything extra would show up now
                actions = [a for a, _ in pd.actions()]
            finally:
                d.stop()
    finally:
        lab.down()
    print(f"outage {args.minutes:.0f} min, poll interval {interval:.0f} s, {failures} failed full polls "
          f"(the backoff spaced them out)")
    print(f"paged after {paged_at:.0f} s (target <= for 120 s + one interval)" if paged_at is not None
          else "NEVER PAGED")
    print(f"blind {blind:.1f} s after the cluster came back (target <= one interval, {interval:.0f} s)")
    print(f"PagerDuty events: {actions} (target: ['trigger', 'resolve'])")


if __name__ == "__main__":
    main()
