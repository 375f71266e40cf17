"""A whole lab cluster cut off for longer than the backoff grows: one page, one resolve, no blind spell.

Shortened figures of the 10-minute run of benchmarks/cluster_outage.py (removed; at 988bdf4): a 1 s poll interval,
``cluster_down`` ``for: 8s`` and the default backoff (5, 10, 20 s ...), so by the third failed
poll the backoff (20 s) is far past the evaluator's 5-poll gap window and past ``for:``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from tests.fixtures.daemon import start_daemon, wait_for
from txnwatch.lab import faults

pytestmark = pytest.mark.lab
FOR_S = 8


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as pd:
        yield pd


def cluster_down_pages(pd: FakePagerDuty) -> list[str]:
    return [action for action, key in pd.actions() if key.startswith("cluster_down") or "cluster_down" in key]


def test_long_outage_pages_once_and_polling_resumes_at_once(require_managed_lab: Any, sqlite_url: str,
                                                            pagerduty: FakePagerDuty) -> None:
    lab = require_managed_lab
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab.bootstrap_servers, request_timeout_ms=2000)],
                     pagerduty=dict(enabled=True, routing_key="outage-key", events_url=pagerduty.url),
                     alert_rules=dict(cluster_down=dict(for_seconds=FOR_S)))
    try:
        wait_for(lambda: (v := d.runtime.state.get("lab")) and v.up, 60, what="first successful poll")
        with faults.cut_connections(lab, None, block=True):
            cut_at = time.monotonic()
            wait_for(lambda: (v := d.runtime.state.get("lab")) and not v.up, 30, what="the cluster marked down")
            wait_for(lambda: cluster_down_pages(pagerduty) == ["trigger"], 40, what="the cluster_down page")
            paged_after = time.monotonic() - cut_at
            # Let the backoff grow past 20 s: the old collector would stay blind that long after the return.
            wait_for(lambda: (v := d.runtime.state.get("lab")) and v.consecutive_failures >= 3 and v, 60,
                     what="the backoff to grow")
        back_at = time.monotonic()
        wait_for(lambda: (v := d.runtime.state.get("lab")) and v.up, 60, what="the cluster to be polled again")
        blind_s = time.monotonic() - back_at
        wait_for(lambda: cluster_down_pages(pagerduty) == ["trigger", "resolve"], 30, what="the resolve")
    finally:
        d.stop()
    print(f"cluster_down paged {paged_after:.1f}s after the cut (for: {FOR_S}s); polled again {blind_s:.1f}s "
          "after the return")
    # Generous for a loaded machine; the old collector needed ~20 s (its remaining backoff) to come back.
    assert paged_after < FOR_S + 12
    assert blind_s < 10
    assert cluster_down_pages(pagerduty) == ["trigger", "resolve"]
