"""The fast lane's refusal holds in pytest-xdist's worker processes (`make test-fast` runs with ``-n auto``).

The lane is set by an environment variable and the refusing ``start_lab`` is installed by tests/conftest.py's
``pytest_configure``: both must reach every worker, or a test that starts PostgreSQL or a Kafka lab by hand
would quietly start it inside the "fast" lane. An inner pytest session, on two workers, runs tests that start
them without the marker and must fail each one naming the marker; a test using a heavy fixture is deselected.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.fixtures.lanes import LANE_ENV

ROOT = Path(__file__).resolve().parents[1]
FAST_LANE_EXPRESSION = "not lab and not postgres and not spark and not browser and not slow"

INNER = '''
from tests.fixtures.postgres_server import start_postgres
from txnwatch.lab import cluster


def test_starts_postgres_unmarked():
    start_postgres()


def test_starts_a_lab_unmarked():
    cluster.start_lab()


def test_uses_the_postgres_fixture(postgres_url):
    raise AssertionError("a test using postgres_url must be deselected in the fast lane")
'''


def test_every_worker_refuses_postgres_and_a_lab_started_by_hand_and_names_the_marker(tmp_path: Path) -> None:
    inner = tmp_path / "test_inner_lane.py"
    inner.write_text(INNER)
    # Only xdist among the installed plugins: the others (hypothesis, schemathesis, playwright...) would double the
    # three interpreters' start-up CPU and play no part here.
    env = {**os.environ, LANE_ENV: "fast", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "xdist.plugin", "-p", "pytest_timeout", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(ROOT), "-o", "addopts=", "-p", "tests.conftest",
         "-n", "2", "--dist", "each", "-m", FAST_LANE_EXPRESSION, str(inner)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    # --dist each: both workers run both tests, so each refusal is seen in each worker; the fixture test is
    # deselected (3 collected, 2 run) and never fails.
    assert "2 workers [2 items]" in out, out
    assert re.search(r"= 4 failed in [0-9.]+s", out), out
    failures = re.findall(r"^\[(gw[01])\] .*\n(.*)$", out, re.M)
    assert sorted(failures) == [
        ("gw0", "the fast lane (make test-fast) must not start PostgreSQL: mark the test @pytest.mark.postgres"),
        ("gw0", "the fast lane (make test-fast) must not start a Kafka lab cluster: mark the test @pytest.mark.lab"),
        ("gw1", "the fast lane (make test-fast) must not start PostgreSQL: mark the test @pytest.mark.postgres"),
        ("gw1", "the fast lane (make test-fast) must not start a Kafka lab cluster: mark the test @pytest.mark.lab"),
    ], out
