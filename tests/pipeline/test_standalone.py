"""The rollups on a real Spark standalone cluster (master + worker from PySpark's own distribution).

Everything else in tests/pipeline runs in ``local[2]``; this is the only place the code meets a
separate executor JVM, a driver launched by ``spark-submit`` and a ``spark://`` master, which is how
sites with a Spark cluster run it. The answers must be the ones ``local`` gives on the same archive.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.daemon import terminate
from tests.pipeline.rollup_rows import rollup_rows, same_value
from txnwatch.lab.ports import free_ports

pytestmark = [pytest.mark.spark, pytest.mark.slow]

UNTIL = date(2026, 11, 20)
DAYS = 2
ROWS = 4_000  # small: the point is the deployment, not the volume (benchmarks/pipeline.py)
DEADLINE_S = 240.0  # generous: the machine may be loaded; a healthy start takes a few seconds


def _spark_home() -> Path:
    pyspark = pytest.importorskip("pyspark")
    return Path(pyspark.__file__).parent


def _env() -> dict[str, str]:
    return os.environ | {"SPARK_HOME": str(_spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                         "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                         "SPARK_NO_DAEMONIZE": "1"}


def _alive_workers(ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A master and one worker (1 core, 512 MB) on 127.0.0.1; yields the master URL."""
    from txnwatch.pipeline.session import JavaMissing, check_java

    try:
        check_java()
    except JavaMissing as exc:
        pytest.skip(str(exc))
    home, env = _spark_home(), _env()
    logs = tmp_path_factory.mktemp("spark-standalone")
    port, ui_port, worker_port, worker_ui = free_ports(4)
    spark_class = str(home / "bin" / "spark-class")
    master_url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with open(logs / "master.log", "wb") as out:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                 "--port", str(port), "--webui-port", str(ui_port)],
                env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        with open(logs / "worker.log", "wb") as out:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                 "--port", str(worker_port), "--webui-port", str(worker_ui), "--cores", "1",
                 "--memory", "1g", "--work-dir", str(logs / "work")],
                env=env | {"SPARK_DAEMON_MEMORY": "256m"}, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + DEADLINE_S
        while _alive_workers(ui_port) < 1:
            dead = [p for p in procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                pytest.fail("Spark standalone did not come up: "
                            + (logs / "master.log").read_text()[-2000:] + (logs / "worker.log").read_text()[-2000:])
            time.sleep(0.5)
        yield master_url
    finally:
        for proc in reversed(procs):
            terminate(proc)


def test_rollups_on_a_standalone_cluster_equal_local(standalone: str, spark: Any, tmp_path: Path) -> None:
    from txnwatch.pipeline.run import Window, run_pipeline
    from txnwatch.pipeline.synth import synthesize

    archive = tmp_path / "archive"
    written = synthesize(str(archive), rows=ROWS, days=DAYS, clusters=2, until=UNTIL)
    window = Window(UNTIL - timedelta(days=DAYS - 1), UNTIL)
    local = run_pipeline(spark, str(archive), window, output_uri=str(tmp_path / "local"))
    assert all(local.values()), {k: len(v) for k, v in local.items()}  # every rollup has something to compare

    main_py = Path(__import__("txnwatch.pipeline.__main__", fromlist=["x"]).__file__ or "")
    submit = subprocess.run(
        [str(_spark_home() / "bin" / "spark-submit"), "--master", standalone,
         "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
         "--conf", f"spark.pyspark.python={sys.executable}", "--conf", "spark.ui.enabled=false",
         "--driver-memory", "512m", "--executor-memory", "512m", "--total-executor-cores", "1",
         str(main_py), "run", "--archive", str(archive), "--no-db", "--no-export",
         "--since", window.since.isoformat(), "--until", window.until.isoformat(),
         "--output", str(tmp_path / "cluster")],
        env=_env(), capture_output=True, text=True, timeout=DEADLINE_S, stdin=subprocess.DEVNULL)
    assert submit.returncode == 0, submit.stderr[-4000:]

    for name, rows in local.items():
        got, want = rollup_rows(tmp_path / "cluster" / name), rollup_rows(tmp_path / "local" / name)
        assert len(got) == len(want) == len(rows), (name, len(got), len(want))
        for g, w in zip(got, want, strict=True):
            assert g.keys() == w.keys() and all(same_value(g[k], w[k]) for k in w), (name, g, w)
    assert sum(written.values()) >= ROWS
