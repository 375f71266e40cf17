"""A real Prometheus server scrapes txnwatch on the lab; every dashboard panel's query returns data."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.deploy.tools import dashboard_exprs, dashboard_files, grafana_to_promql, load_dashboard
from tests.fixtures.daemon import Daemon, free_port, start_daemon, wait_for
from txnwatch.lab import faults
from txnwatch.lab.faults import inject_hanging_transaction
from txnwatch.lab.workload import Workload

pytestmark = pytest.mark.lab


@pytest.fixture
def daemon(lab_cluster: Any, sqlite_url: str) -> Iterator[Daemon]:
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers,
                                    broker_metrics_urls={str(k): v for k, v in lab_cluster.broker_metrics_urls().items()},
                                    # The demo's canary (cli/demo.py), on a topic of this test's own.
                                    canary=dict(enabled=True, interval_seconds=2, topic="_txnwatch_canary_dashboards"))],
                     detection=dict(lso_stall_seconds=3), alert_rules=dict(hanging_transaction=dict(for_seconds=0)))
    try:
        yield d
    finally:
        d.stop()


@pytest.fixture
def prometheus(daemon: Daemon, tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("prometheus")
    assert binary, "prometheus is not installed: run `make test` (it installs Debian's prometheus package)"
    port = free_port()
    config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
              "scrape_configs": [{"job_name": "txnwatch", "static_configs": [
                  {"targets": [daemon.url.removeprefix("http://")]}]}]}
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp_path / 'tsdb'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _get(base + "/-/ready") == 200, 60, what="Prometheus to be ready")
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _get(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2).status_code
    except httpx.HTTPError:
        return None


# Kafka's coordinator load time is a sampled sensor (2 windows of 30 s): it has a figure only within about a minute
# of a __transaction_state partition loading, and the shared lab has been up longer. Its panel counts as wired when
# every broker's exporter is read for it (the _up series exists, 0 while the window holds no load).
WINDOWED = ("txnwatch_broker_txn_coordinator_load_time_max_seconds", "txnwatch_broker_txn_coordinator_load_time_avg_seconds")
WINDOWED_UP = 'txnwatch_broker_signal_up{signal="coordinator_load_time"}'


# Counted only when something fails: a healthy canary has no failure series. Its panel counts as wired when the
# canary reports (txnwatch_canary_up exists).
ON_FAILURE = ("txnwatch_canary_failures_total",)
ON_FAILURE_UP = "txnwatch_canary_up"


def query(base: str, expr: str) -> list[Any]:
    body = httpx.get(base + "/api/v1/query", params={"query": expr}, timeout=10).json()
    assert body["status"] == "success", (expr, body)
    return list(body["data"]["result"])


def test_every_dashboard_panel_has_data_in_the_demo_scenario(daemon: Daemon, prometheus: str, lab_cluster: Any,
                                                             new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    workload = Workload(lab_cluster.bootstrap_servers, "steady", lab=lab_cluster, topic_prefix=f"{topic}-wl", seed=1)
    workload.start()
    stack = contextlib.ExitStack()
    try:
        with inject_hanging_transaction(lab_cluster.bootstrap_servers, topic, 0):
            wait_for(lambda: query(prometheus, "txnwatch_hanging_transactions > 0"), 90,
                     what="Prometheus to see the hanging transaction")
            wait_for(lambda: query(prometheus, "txnwatch_consumergroup_lag_lso"), 60, what="group lag series")
            wait_for(lambda: query(prometheus, "txnwatch_canary_commit_latency_seconds_count > 0"), 60,
                     what="the canary's first commits")
            # A Flink sink that keeps leaving a checkpoint open while the next, begun later, commits: a lingering
            # (superseded) transaction at every moment, though the coordinator aborts each at the lab's 15 s
            # timeout: the frameworks panels' data (docs/frameworks.md), and the per-transaction panels' (they show
            # open transactions only) while the panels are queried.
            sink = faults.start_lingering_sink(lab_cluster.bootstrap_servers, topic, 0,
                                               prefix=f"dash-sink-{uuid.uuid4().hex[:6]}",
                                               transaction_timeout_ms=lab_cluster.transaction_max_timeout_ms)
            stack.callback(sink.clear)
            wait_for(lambda: query(prometheus, "txnwatch_flink_lingering_transaction_age_seconds"), 30, interval=0.2,
                     what="the lingering Flink transaction")
            wait_for(lambda: query(prometheus, "txnwatch_transaction_age_seconds"), 12, interval=0.2,
                     what="an open transaction")
            empty: list[str] = []
            checked: dict[str, int] = {}
            for path in dashboard_files():
                for where, expr in dashboard_exprs(load_dashboard(path)):
                    checked[path.name] = checked.get(path.name, 0) + 1
                    if query(prometheus, grafana_to_promql(expr)):
                        continue
                    if any(name in expr for name in WINDOWED) and query(prometheus, WINDOWED_UP):
                        continue  # reported by the exporter, without a figure in Kafka's window: see WINDOWED
                    if any(name in expr for name in ON_FAILURE) and query(prometheus, ON_FAILURE_UP):
                        continue  # nothing failed: see ON_FAILURE
                    empty.append(f"{path.name}: {where}: {expr}")
            assert not empty, "panels without data:\n" + "\n".join(empty)
            assert set(checked) == {p.name for p in dashboard_files()} and min(checked.values()) >= 3, checked
    finally:
        stack.close()
        workload.stop(timeout=15)
