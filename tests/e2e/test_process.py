"""`txnwatch run` as operators run it: a real process, signals, secrets, admin actions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.fixtures.daemon import answers_ok, free_port, wait_for

#: Generous on a loaded machine (the suite runs on two workers beside Kafka brokers): a daemon process imports
#: and migrates in ~5 s on a quiet core, several times that when both cores are busy.
START_S = 90
HTTP_S = 30
ABORT = {"cluster": "secure", "topic": "t", "partition": 0, "producer_id": 1, "producer_epoch": 0}

SECRETS = {"sasl": "sasl-S3CRET-pw", "pd": "pd-R0UTING-key", "admin": "adm-T0KEN-xyz"}


def write_config(tmp_path: Path, **extra: Any) -> tuple[Path, int]:
    port = free_port()
    config = {
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "poll_interval_seconds": 1,
        "api": {"host": "127.0.0.1", "port": port, "admin_enabled": True, "admin_token": SECRETS["admin"]},
        "pagerduty": {"enabled": True, "routing_key": SECRETS["pd"], "events_url": f"http://127.0.0.1:{free_port()}/v2/enqueue"},
        "clusters": [{"name": "secure", "bootstrap_servers": f"127.0.0.1:{free_port()}", "request_timeout_ms": 1000,
                      "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-512",
                      "sasl_username": "txnwatch", "sasl_password": SECRETS["sasl"]}],
        **extra,
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path, port


def start(config: Path, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, TXNWATCH_LOG_LEVEL="DEBUG")
    return subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(config)],
                            stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def test_sigterm_shuts_down_gracefully_and_secrets_never_leak(tmp_path: Path) -> None:
    config, port = write_config(tmp_path)
    log = tmp_path / "txnwatch.log"
    proc = start(config, log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers_ok(base + "/healthz", 10), START_S, what="the daemon to serve")
        wait_for(lambda: (r := httpx.get(base + "/api/v1/clusters", timeout=HTTP_S)).status_code == 200 and r.json()[0]["last_error"],
                 START_S, what="a failed poll of the unreachable cluster")
        bodies = [httpx.get(base + path, timeout=HTTP_S).text for path in
                  ("/api/v1/clusters", "/api/v1/clusters/secure", "/openapi.json", "/readyz", "/metrics")]
        bad = httpx.post(base + "/api/v1/admin/abort", headers={"Authorization": "Bearer wrong"},
                         json=ABORT, timeout=HTTP_S)
        assert bad.status_code == 401
        none = httpx.post(base + "/api/v1/admin/abort",
                          json=ABORT, timeout=HTTP_S)
        assert none.status_code == 401
        assert httpx.get(base + "/healthz", timeout=HTTP_S).headers["x-content-type-options"] == "nosniff"
        big = httpx.post(base + "/api/v1/admin/abort", content=b"x" * 200_000,
                         headers={"Authorization": f"Bearer {SECRETS['admin']}", "Content-Type": "application/json"},
                         timeout=HTTP_S)
        assert big.status_code == 413
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM after a clean shutdown
        assert time.monotonic() - started < 25
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert "Application shutdown complete" in text
    for secret in SECRETS.values():
        assert secret not in text, f"secret leaked into the log: {secret}"
        for body in bodies:
            assert secret not in body, f"secret leaked into an API answer: {secret}"


def test_admin_disabled_by_default(tmp_path: Path) -> None:
    config, port = write_config(tmp_path, api={"host": "127.0.0.1", "port": 0})
    data = yaml.safe_load(config.read_text())
    data["api"] = {"host": "127.0.0.1", "port": port}
    config.write_text(yaml.safe_dump(data))
    proc = start(config, tmp_path / "log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: answers_ok(base + "/healthz", 10), START_S, what="the daemon to serve")
        r = httpx.post(base + "/api/v1/admin/abort", headers={"Authorization": f"Bearer {SECRETS['admin']}"},
                       json=ABORT, timeout=HTTP_S)
        assert r.status_code == 403 and "disabled" in r.json()["detail"]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)


