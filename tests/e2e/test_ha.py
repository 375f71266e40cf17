"""Two replicas on one PostgreSQL: one leader pages, the follower takes over when it dies, no duplicate page."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from tests.fixtures.daemon import free_port, terminate, wait_for
from txnwatch.lab.faults import inject_hanging_transaction

pytestmark = pytest.mark.lab
POLL_S = 1.0


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as pd:
        yield pd


def replica(tmp_path: Path, name: str, db_url: str, bootstrap: str, pd_url: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    config = {
        "database_url": db_url, "poll_interval_seconds": POLL_S,
        "clusters": [{"name": "lab", "bootstrap_servers": bootstrap}],
        "pagerduty": {"enabled": True, "routing_key": "ha-key", "events_url": pd_url},
        "alert_rules": {"hanging_transaction": {"for_seconds": 0}},
        "api": {"host": "127.0.0.1", "port": port},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (tmp_path / f"{name}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(path)], stdout=log,
                            stderr=subprocess.STDOUT, env=dict(os.environ))
    return proc, f"http://127.0.0.1:{port}"


def role(base: str) -> str | None:
    try:
        return httpx.get(base + "/readyz", timeout=2).json().get("role")
    except (httpx.HTTPError, ValueError):
        return None


def test_follower_takes_over_without_a_second_page(tmp_path: Path, lab_cluster: Any, postgres_url: str,
                                                    pagerduty: FakePagerDuty, new_topic: Callable[..., str]) -> None:
    from txnwatch.store.migrate import upgrade

    upgrade(postgres_url)
    bootstrap = lab_cluster.bootstrap_servers
    a, a_url = replica(tmp_path, "a", postgres_url, bootstrap, pagerduty.url)
    b = None
    try:
        wait_for(lambda: role(a_url) == "leader", 60, what="replica a to lead")
        b, b_url = replica(tmp_path, "b", postgres_url, bootstrap, pagerduty.url)
        wait_for(lambda: role(b_url) == "follower", 60, what="replica b to follow")

        topic = new_topic(partitions=1)
        with inject_hanging_transaction(bootstrap, topic, 0) as fault:
            key = f"hanging_transaction/lab/{topic}-0/pid={fault.producer_id}"
            wait_for(lambda: ("trigger", key) in pagerduty.actions(), lab_cluster.transaction_max_timeout_ms / 1000 + 40,
                     what="the page from the leader")
            # The follower serves the leader's findings from the shared database.
            assert any(h["topic"] == topic for h in httpx.get(b_url + "/api/v1/hanging").json()["items"])

            a.send_signal(signal.SIGKILL)
            a.wait(timeout=10)
            killed = time.monotonic()
            wait_for(lambda: role(b_url) == "leader", 2 * POLL_S + 10, interval=0.2, what="replica b to take over")
            takeover_s = time.monotonic() - killed
            time.sleep(4 * POLL_S)  # several polls by the new leader with the incident still open
            assert [act for act in pagerduty.actions() if act[1] == key] == [("trigger", key)]
        wait_for(lambda: ("resolve", key) in pagerduty.actions(), 60, what="the resolve from the new leader")
        assert [act for act in pagerduty.actions() if act[1] == key] == [("trigger", key), ("resolve", key)]
        assert takeover_s < 2 * POLL_S + 10
    finally:
        terminate(a)
        terminate(b)
