"""Guessing tokens over real HTTP on loopback (issue 23 items 7 and 8): bounded, counted, logged once, audited.

Before: hundreds of wrong tokens per second on the login, the bearer and the admin token, no 429, no
delay, not one log line, no audit row; the console cookie was the read token itself and never Secure
behind a TLS-terminating proxy.  Here a real uvicorn serves the app with the daemon's own proxy options
(txnwatch.supervise.server.proxy_options); each test sends 300 wrong credentials from one client and checks the
statuses, the Retry-After, the log lines, the counter and (admin) the audit rows.  The test client is
127.0.0.1, a trusted proxy by default, so X-Forwarded-For gives each test a client of its own.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import text

from tests.fixtures.daemon import answers_ok, free_port, terminate, wait_for
from tests.fixtures.guarded import ADMIN, READ, serving
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.serve.api.sessions import COOKIE, LEGACY_COOKIE

ATTEMPTS, LIMIT = 300, 10
ABORT = {"cluster": "c", "topic": "t", "partition": 0, "producer_id": 1, "producer_epoch": 0, "dry_run": False}


def counted(runtime: Runtime, kind: str, result: str) -> float | None:
    return runtime.registry.get_sample_value("txnwatch_auth_failures_total", {"kind": kind, "result": result})


def auth_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "txnwatch.auth"]


def assert_throttled(statuses: list[int], retry_after: list[str | None], refused: int) -> None:
    assert statuses == [refused] * LIMIT + [429] * (ATTEMPTS - LIMIT), statuses
    waits = [int(value) for value in retry_after[LIMIT:] if value is not None]
    assert len(waits) == ATTEMPTS - LIMIT and all(1 <= w <= 60 for w in waits), waits[:5]


def test_wrong_bearer_tokens(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "txnwatch.auth")
    with serving(tmp_path) as (url, runtime, _), httpx.Client(base_url=url, timeout=10) as http:
        me = {"X-Forwarded-For": "192.0.2.1"}
        answers = [http.get("/api/v1/clusters", headers={**me, "Authorization": f"Bearer guess-{i}"})
                   for i in range(ATTEMPTS)]
        assert_throttled([a.status_code for a in answers], [a.headers.get("retry-after") for a in answers], 401)
        # Throttled means every credential of this client, the right one too (a success would tell a guesser).
        assert http.get("/api/v1/clusters", headers={**me, "Authorization": f"Bearer {READ}"}).status_code == 429
        assert http.get("/metrics", headers={"X-Forwarded-For": "192.0.2.99",
                                             "Authorization": f"Bearer {READ}"}).status_code == 200
        assert http.get("/healthz", headers=me).status_code == 200  # probes are never throttled
        forged = http.get("/api/v1/clusters", headers={"X-Forwarded-For": "192.0.2.50",
                                                       "Cookie": f"{COOKIE}=v1.99999999999.x.y"})
        assert forged.status_code == 401
        assert (counted(runtime, "read", "refused"), counted(runtime, "read", "throttled")) == (LIMIT + 1, 291)
    lines = auth_lines(caplog)
    assert len(lines) == 2, lines  # one per client per window: 192.0.2.1 and the forged cookie's 192.0.2.50
    assert "192.0.2.1: wrong bearer token" in lines[0] and "192.0.2.50: session cookie not signed" in lines[1]
    assert READ not in "".join(lines) and "guess-" not in "".join(lines)


def test_wrong_logins(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "txnwatch.auth")
    with serving(tmp_path) as (url, runtime, _), httpx.Client(base_url=url, timeout=10) as http:
        me = {"X-Forwarded-For": "192.0.2.2"}
        answers = [http.post("/console/login", data={"token": f"guess-{i}"}, headers=me) for i in range(ATTEMPTS)]
        assert [a.status_code for a in answers[:LIMIT]] == [303] * LIMIT
        assert all("error=true" in a.headers["location"] for a in answers[:LIMIT])
        assert_throttled([303] * LIMIT + [a.status_code for a in answers[LIMIT:]],
                         [a.headers.get("retry-after") for a in answers], 303)
        assert http.post("/console/login", data={"token": READ}, headers=me).status_code == 429
        assert "set-cookie" not in http.post("/console/login", data={"token": READ}, headers=me).headers
        assert (counted(runtime, "login", "refused"), counted(runtime, "login", "throttled")) == (LIMIT, 292)
    assert len(auth_lines(caplog)) == 1


def test_wrong_admin_tokens_are_audited(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "txnwatch.auth")
    with serving(tmp_path) as (url, runtime, _), httpx.Client(base_url=url, timeout=10) as http:
        me = {"X-Forwarded-For": "192.0.2.3"}
        answers = [http.post("/api/v1/admin/abort", json=ABORT,
                             headers={**me, **({"Authorization": f"Bearer guess-{i}"} if i % 2 else {})})
                   for i in range(ATTEMPTS)]
        assert_throttled([a.status_code for a in answers], [a.headers.get("retry-after") for a in answers], 401)
        right = http.post("/api/v1/admin/abort", json=ABORT, headers={**me, "Authorization": f"Bearer {ADMIN}"})
        assert right.status_code == 429  # Kafka is not reached: it would answer 503 (127.0.0.1:1)
        assert (counted(runtime, "admin", "refused"), counted(runtime, "admin", "throttled")) == (LIMIT, 291)
        with runtime.engine.connect() as conn:
            rows = conn.execute(text("SELECT actor, action, cluster, dry_run, outcome FROM admin_audit "
                                     "ORDER BY id")).all()
    assert len(rows) == LIMIT
    assert all(r[0] == "unauthenticated 192.0.2.3" and r[1] == "abort_transaction" and r[2] == "" and r[3]
               for r in rows)
    assert rows[0][4] == "refused: admin token missing or wrong"
    assert rows[-1][4].endswith("client throttled (429) until its window ends")
    assert len(auth_lines(caplog)) == 1


def test_rotating_x_forwarded_for_from_an_untrusted_peer_changes_nothing(tmp_path: Path) -> None:
    """Only a trusted proxy's X-Forwarded-For names the client; anyone else is counted by their own address."""
    with serving(tmp_path, trusted_proxies=["192.0.2.250"]) as (url, _, app), \
            httpx.Client(base_url=url, timeout=10) as http:
        statuses = [http.get("/api/v1/clusters", headers={"X-Forwarded-For": f"198.51.100.{i % 250}",
                                                          "Authorization": "Bearer guess"}).status_code
                    for i in range(ATTEMPTS)]
    assert statuses == [401] * LIMIT + [429] * (ATTEMPTS - LIMIT)
    assert len(app.state.auth_throttle) == 1


def login_cookie(url: str, headers: dict[str, str] | None = None) -> str:
    answer = httpx.post(url + "/console/login", data={"token": READ}, headers=headers, timeout=10)
    assert answer.status_code == 303, answer.status_code
    cookies = answer.headers.get_list("set-cookie")
    session = next(c for c in cookies if c.startswith(COOKIE + "="))
    assert READ not in session
    legacy = next(c for c in cookies if c.startswith(LEGACY_COOKIE + "="))  # the old cookie held the token
    assert "max-age=0" in legacy.lower()
    return session.lower()


def test_the_session_cookie_is_secure_whenever_the_browser_uses_https(tmp_path: Path) -> None:
    https = {"X-Forwarded-Proto": "https"}
    with serving(tmp_path / "a") as (url, _, _):
        plain = login_cookie(url)
        assert "httponly" in plain and "samesite=strict" in plain and "max-age=43200" in plain
        assert "secure" not in plain
        assert "secure" in login_cookie(url, https)  # the trusted proxy (127.0.0.1) says https
    with serving(tmp_path / "b", trusted_proxies=[]) as (url, _, _):
        assert "secure" not in login_cookie(url, https)  # nobody is trusted to say so
    with serving(tmp_path / "c", trusted_proxies=[], public_url="https://txnwatch.example") as (url, _, _):
        assert "secure" in login_cookie(url)  # the public URL is https


def test_with_api_workers_the_collector_renders_what_the_workers_counted(tmp_path: Path) -> None:
    """A real `txnwatch run` with api.workers: 2: the workers refuse and throttle, /metrics (rendered by the
    collecting process) counts every failure, whichever worker served it."""
    port = free_port()
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}", "poll_interval_seconds": 1,
        "api": {"host": "127.0.0.1", "port": port, "workers": 2, "read_token": READ},
        "clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1", "connect_timeout_ms": 200}]}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    log = tmp_path / "txnwatch.log"
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers_ok(base + "/healthz"), 180, what="the API workers to serve")
        # Two clients (X-Forwarded-For from the trusted 127.0.0.1), new connections each time: both workers serve.
        statuses = [httpx.get(base + "/api/v1/clusters", timeout=10, headers={
            "X-Forwarded-For": f"192.0.2.{i % 2}", "Authorization": "Bearer guess"}).status_code for i in range(60)]
        assert statuses.count(401) >= 2 * LIMIT and statuses.count(429) > 0, statuses

        def counted_total() -> float:
            text = httpx.get(base + "/metrics", timeout=10, headers={"Authorization": f"Bearer {READ}",
                                                                      "X-Forwarded-For": "192.0.2.200"}).text
            families = {f.name: f for f in text_string_to_metric_families(text)}
            return sum(s.value for s in families["txnwatch_auth_failures"].samples
                       if s.name.endswith("_total") and s.labels["kind"] == "read")

        wait_for(lambda: counted_total() == 60, 90, what="every failure rendered by the collector")
    finally:
        terminate(proc)
    assert log.read_text().count("authentication failed from 192.0.2.") <= 2 * 2  # a line per client per worker
