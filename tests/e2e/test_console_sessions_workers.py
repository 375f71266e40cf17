"""`txnwatch run` with api.workers: 2: a Sign out in one serving process ends the session in every one, and
`txnwatch sessions end` (another process, the same database) ends every session the workers accepted
(issue 38 item 5).  The session lives in the database, not in a process: each request below is a fresh
connection, which either worker may take."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

from tests.fixtures.daemon import free_port, wait_for
from txnwatch.serve.api.sessions import COOKIE

pytestmark = pytest.mark.slow  # a daemon with two worker processes: ~1 min on a loaded machine

READ = "r34d-t0ken"
PAGE = "/console/runbooks"
TRIES = 16


def _sign_in(base: str) -> str:
    answer = httpx.post(base + "/console/login", data={"token": READ}, timeout=30)
    assert answer.status_code == 303, answer.text
    return answer.cookies[COOKIE]


def _statuses(base: str, cookie: str) -> set[int]:
    """What ``TRIES`` fresh connections holding the cookie get (no connection reused: any worker may answer)."""
    found = set()
    for _ in range(TRIES):
        with httpx.Client(timeout=30) as client:
            found.add(client.get(base + PAGE, headers={"Cookie": f"{COOKIE}={cookie}",
                                                       "Accept": "application/json"}).status_code)
    return found


def test_sessions_end_in_every_api_worker(tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "api": {"host": "127.0.0.1", "port": port, "workers": 2, "read_token": READ},
        "clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1"}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)], env=env,
                            stdout=(tmp_path / "txnwatch.log").open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: httpx.get(base + "/healthz", timeout=5).status_code == 200, 120, what="the daemon")
        signed_out, kept = _sign_in(base), _sign_in(base)
        assert _statuses(base, signed_out) == {200}
        out = httpx.post(base + "/console/logout", headers={"Cookie": f"{COOKIE}={signed_out}"}, timeout=30)
        assert out.status_code == 303 and out.headers["location"] == "/console/login"
        assert _statuses(base, signed_out) == {401}  # the copy, in every worker
        assert _statuses(base, kept) == {200}

        ended = subprocess.run([sys.executable, "-m", "txnwatch", "sessions", "end", "--config", str(config)],
                               env=env, capture_output=True, text=True, timeout=120, check=False)
        assert ended.returncode == 0 and ended.stdout.startswith("ended 1 console session "), ended
        assert _statuses(base, kept) == {401}
        assert _statuses(base, _sign_in(base)) == {200}
        assert httpx.get(base + "/api/v1/clusters", headers={"Authorization": f"Bearer {READ}"},
                         timeout=30).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
