"""Start-up failures a person can act on: a port in use has its own exit code, an unreachable cluster is told
within the configured connect timeout (not the much longer request timeout)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from txnwatch.core import exitcodes


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TXNWATCH_")}
    env.update(extra)
    return env


def test_a_port_in_use_says_so_and_exits_with_its_own_code(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "txnwatch", "run"], capture_output=True, text=True, timeout=120,
                                env=_env(TXNWATCH_DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
                                         TXNWATCH_API__HOST="127.0.0.1", TXNWATCH_API__PORT=str(port)))
    assert result.returncode == exitcodes.PORT_UNAVAILABLE, result.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "db.sqlite").exists(), "the port is checked before anything else is started"


def test_an_unreachable_cluster_is_reported_within_the_connect_timeout(tmp_path: Path) -> None:
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    config = tmp_path / "c.yaml"
    config.write_text(json.dumps({"clusters": [{"name": "gone", "bootstrap_servers": f"127.0.0.1:{port}",
                                                "connect_timeout_ms": 500, "request_timeout_ms": 120_000}]}))
    code = ("import time, sys\nfrom txnwatch.core.config import load_settings\n"
            "from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings\n"
            "from txnwatch.cli.hanging import run\n"
            f"cfg = load_settings({str(config)!r}).clusters[0]\n"
            "with ClusterConnection(ClusterConnectionSettings.from_config(cfg)) as c:\n"
            "    t = time.monotonic(); status, text = run(c, 'table', None)\n"
            "print(status, round(time.monotonic() - t, 2)); print(text, file=sys.stderr)\n")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    status, seconds = result.stdout.split()
    assert int(status) == exitcodes.CLUSTER_UNREACHABLE and "unreachable" in result.stderr, result.stderr
    # With the 120 s request timeout doing the job this would take minutes; the generous bound tolerates a busy machine.
    assert float(seconds) < 30, f"unreachable reported after {seconds}s (connect timeout 0.5 s)"
    print(f"unreachable reported {seconds}s after the first connect (connect_timeout_ms=500); process "
          f"{time.monotonic() - started:.1f}s in all")
