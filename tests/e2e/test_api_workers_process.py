"""`txnwatch run` with api.workers: 2 on the lab cluster: one collecting process, two serving; the workers answer
a new consumer group from the collector's latest poll (within two polls of its first commit, with /metrics' lag);
a killed worker comes back while the other keeps answering, and SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.e2e.test_group_freshness import appears_within_two_polls, metric_lags
from tests.fixtures.daemon import free_port, wait_for
from txnwatch.lab import faults

pytestmark = pytest.mark.lab


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            continue
    return found


def workers_of(pid: int) -> set[int]:
    """The API workers among the daemon's children (it also starts short-lived helpers: schema check, archive)."""
    return {c for c in children(pid) if b"--multiprocessing-fork" in _cmdline(c)}


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _get(url: str, check: Any) -> bool:
    try:
        response = httpx.get(url, timeout=10)
        return response.status_code == 200 and bool(check(response))
    except httpx.HTTPError:
        return False


def _polls(base: str) -> int:
    """txnwatch_polls_total of the lab cluster as the workers serve it (the collector's render, published with the
    views the API answers from)."""
    text = httpx.get(base + "/metrics", timeout=10).text
    return int(sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
                   if line.startswith('txnwatch_polls_total{cluster="lab"')))


def test_two_api_workers_serve_the_collectors_view_and_survive_a_killed_worker(
        lab_cluster: Any, tmp_path: Path, new_topic: Callable[..., str]) -> None:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}", "poll_interval_seconds": 1,
        "api": {"host": "127.0.0.1", "port": port, "workers": 2},
        "clusters": [{"name": "lab", "bootstrap_servers": lab_cluster.bootstrap_servers}]}))
    log = tmp_path / "txnwatch.log"
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: len(workers_of(proc.pid)) == 2, 60, what="two API worker processes")
        wait_for(lambda: _get(base + "/api/v1/clusters", lambda r: r.json()[0]["up"] is True), 90,
                 what="the workers to show the collector's successful poll")
        wait_for(lambda: _get(base + "/readyz", lambda r: r.json()["status"] == "ready"), 60, what="readiness")
        scraped = httpx.get(base + "/metrics", headers={"Accept-Encoding": "gzip"}, timeout=10)
        assert scraped.status_code == 200 and scraped.headers["content-encoding"] == "gzip"
        assert 'txnwatch_cluster_up{cluster="lab"} 1.0' in scraped.text

        # A group that appears now: its lag from the collector's poll (the stored samples wait 300 s).
        topic = new_topic(partitions=1)
        producer = faults.transactional_producer(lab_cluster.bootstrap_servers, faults.unique_transactional_id("w"),
                                                 10_000)
        producer.begin_transaction()
        for _ in range(3):
            producer.send(topic, b"committed", partition=0)
        producer.commit_transaction()
        producer.close(timeout=5)
        group = f"workers-{topic}"
        seen = appears_within_two_polls(base, lambda: _polls(base), group, {(topic, 0): 1},
                                        lab_cluster.bootstrap_servers)
        # 3 records and the commit marker (LSO = HWM = 4), committed at 1; the marker ends the partition.
        assert [(p["lag_lso"], p["lag_hwm"]) for p in seen["detail"]["partition_lags"]] == [(3, 3)]
        assert metric_lags(httpx.get(base + "/metrics", timeout=10).text, group) == {(topic, 0): (3, 3, 3)}

        first = workers_of(proc.pid)
        victim = min(first)
        os.kill(victim, signal.SIGKILL)
        answered = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # The surviving worker answers every request while the killed one is replaced.
            assert httpx.get(base + "/healthz", timeout=10).status_code == 200
            answered += 1
            now = workers_of(proc.pid)
            if len(now) == 2 and victim not in now:
                break
            time.sleep(0.2)
        now = workers_of(proc.pid)
        assert len(now) == 2 and victim not in now and (first - {victim}) <= now, (first, now)
        assert answered > 0
        wait_for(lambda: _get(base + "/metrics", lambda r: "txnwatch_cluster_up" in r.text), 30,
                 what="the new worker (or the old) serving /metrics")

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        assert not any(Path(f"/proc/{w}").exists() and b"--multiprocessing-fork" in _cmdline(w) for w in now)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert f"(pid {victim}) exited with code -9" in text
    assert "txnwatch stopped" in text
