"""`txnwatch run` with api.workers: 2 on the lab cluster: one collecting process, two serving; a killed worker
comes back while the other keeps answering, and SIGTERM stops them all."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.fixtures.daemon import free_port, wait_for

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


def test_two_api_workers_serve_the_collectors_view_and_survive_a_killed_worker(lab_cluster: Any,
                                                                               tmp_path: Path) -> None:
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
