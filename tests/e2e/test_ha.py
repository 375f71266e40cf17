"""A fleet of three `txnwatch run` replicas on one PostgreSQL watching three lab clusters.

The clusters are spread one per replica.  With a hanging-transaction incident open,
the replica watching it is killed with SIGKILL; its cluster moves within the lease
time.  Then the new holder is cut off from PostgreSQL (through the lab's TCP proxy):
it stops watching by itself and the last replica takes over.  PagerDuty (the fake)
sees exactly one trigger and one resolve per incident throughout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from tests.fixtures.daemon import free_port, terminate, wait_for
from tests.fixtures.db_proxy import DbProxy, db_proxy
from txnwatch.lab.faults import inject_hanging_transaction

pytestmark = pytest.mark.lab
POLL_S = 1.0
LEASE_S, RENEW_S, MARGIN_S = 6.0, 1.0, 2.0
MOVE_S = LEASE_S + RENEW_S + 6  # a lease's time, one round, and slack for a loaded machine


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as pd:
        yield pd


@pytest.fixture(scope="module")
def small_labs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Any]]:
    """Two more clusters of one combined broker/controller each (no proxy), the cheapest lab there is.

    Started on this thread, one after the other: the lab ties its JVMs to the thread that
    spawned them (they die with it), so a helper thread cannot start them side by side."""
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LabSettings

    labs: list[Any] = []
    try:
        for i in range(2):
            labs.append(start_lab(LabSettings(brokers=1, combined=True, proxy=False),
                                  tmp_path_factory.mktemp(f"fleet-lab{i}"), die_with_parent=True, quiet=True))
        yield labs
    finally:
        for lab in labs:
            lab.down()


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    url: str
    route: int

    def ready(self) -> bool:
        try:
            return httpx.get(self.url + "/readyz", timeout=3).status_code == 200
        except httpx.HTTPError:
            return False

    def held(self) -> list[str] | None:
        """The clusters this replica says it watches (from its own clock); None if it does not answer."""
        try:
            return list(httpx.get(self.url + "/readyz", timeout=3).json()["clusters_held"])
        except (httpx.HTTPError, ValueError, KeyError):
            return None


def start_replica(tmp_path: Path, name: str, route: int, db_url: str, clusters: dict[str, str],
                  pd_url: str) -> Replica:
    port = free_port()
    config = {
        "database_url": db_url, "poll_interval_seconds": POLL_S,
        "clusters": [{"name": n, "bootstrap_servers": b} for n, b in clusters.items()],
        "pagerduty": {"enabled": True, "routing_key": "fleet-key", "events_url": pd_url},
        "alert_rules": {"hanging_transaction": {"for_seconds": 0}},
        "fleet": {"lease_seconds": LEASE_S, "renew_seconds": RENEW_S, "margin_seconds": MARGIN_S,
                  "replica_id": name},
        "api": {"host": "127.0.0.1", "port": port},
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (tmp_path / f"{name}.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(path)], stdout=log,
                            stderr=subprocess.STDOUT, env=dict(os.environ))
    return Replica(name, proc, f"http://127.0.0.1:{port}", route)


def holders(replicas: list[Replica]) -> dict[str, list[str]]:
    """cluster -> the replicas that say they watch it (a replica that does not answer says nothing)."""
    seen: dict[str, list[str]] = {}
    for r in replicas:
        for cluster in r.held() or []:
            seen.setdefault(cluster, []).append(r.name)
    return seen


def watched_by(replicas: list[Replica], cluster: str) -> Callable[[], Replica | None]:
    def probe() -> Replica | None:
        for r in replicas:
            if cluster in (r.held() or []):
                return r
        return None

    return probe


def test_fleet_spreads_clusters_and_moves_them_without_losing_or_doubling_a_page(
        tmp_path: Path, lab_cluster: Any, small_labs: list[Any], postgres_server: Any, postgres_url: str,
        pagerduty: FakePagerDuty, new_topic: Callable[..., str]) -> None:
    from txnwatch.store.migrate import upgrade

    upgrade(postgres_url)
    clusters = {"lab": lab_cluster.bootstrap_servers, "one": small_labs[0].bootstrap_servers,
                "two": small_labs[1].bootstrap_servers}
    replicas: list[Replica] = []
    with db_proxy(postgres_server.port, 3) as proxy:
        try:
            for i, name in enumerate(("a", "b", "c")):
                replicas.append(start_replica(tmp_path, name, i, proxy.url(postgres_url, i), clusters, pagerduty.url))
            wait_for(lambda: sorted(len(r.held() or []) for r in replicas) == [1, 1, 1]
                     and sorted(holders(replicas)) == sorted(clusters), 90, what="one cluster per replica")
            wait_for(lambda: all(r.ready() for r in replicas), 60, what="every cluster polled (each replica's /readyz)")

            topic = new_topic(partitions=1)
            with inject_hanging_transaction(lab_cluster.bootstrap_servers, topic, 0) as fault:
                key = f"hanging_transaction/lab/{topic}-0/pid={fault.producer_id}"
                wait_for(lambda: ("trigger", key) in pagerduty.actions(),
                         lab_cluster.transaction_max_timeout_ms / 1000 + 40, what="the page")

                victim = wait_for(watched_by(replicas, "lab"), 10, what="the replica watching lab")
                victim.proc.send_signal(signal.SIGKILL)
                victim.proc.wait(timeout=10)
                killed_at = time.monotonic()
                alive = [r for r in replicas if r is not victim]
                heir = wait_for(watched_by(alive, "lab"), MOVE_S, interval=0.2, what="lab to move after kill -9")
                moved_s = time.monotonic() - killed_at
                wait_for(lambda: sorted(holders(alive)) == sorted(clusters), MOVE_S, interval=0.2,
                         what="every cluster of the killed replica to move")
                time.sleep(4 * POLL_S)  # the heir polls with the incident open: it must not page again

                proxy.cut(heir.route)
                cut_at = time.monotonic()
                last = next(r for r in alive if r is not heir)
                wait_for(lambda: "lab" in (last.held() or []), MOVE_S, interval=0.2,
                         what="lab to move off the replica cut from PostgreSQL")
                cut_moved_s = time.monotonic() - cut_at
                # It stopped by its own clock before lab could move; asked again in case its /readyz is slow
                # while its database connections fail.
                wait_for(lambda: heir.held() == [], 15, interval=0.5, what="the cut-off replica to hold nothing")
                time.sleep(4 * POLL_S)
                assert Counter(pagerduty.actions())[("trigger", key)] == 1
            wait_for(lambda: ("resolve", key) in pagerduty.actions(), 60, what="the resolve from the last replica")

            proxy.restore(heir.route)
            wait_for(lambda: len(heir.held() or []) >= 1, MOVE_S + 10, what="the cut-off replica to rejoin")
            time.sleep(2 * RENEW_S)
            counts = Counter(pagerduty.actions())
            assert [a for a in pagerduty.actions() if a[1] == key] == [("trigger", key), ("resolve", key)]
            assert all(n == 1 for n in counts.values()), f"a page went out twice: {counts}"
            assert moved_s <= MOVE_S and cut_moved_s <= MOVE_S, (moved_s, cut_moved_s)
            assert all(len(names) == 1 for names in holders(alive).values()), holders(alive)
        finally:
            for r in replicas:
                terminate(r.proc)


def test_proxy_url_rewrites_only_the_port() -> None:
    proxy = DbProxy(control=None, ports=[1111, 2222])  # type: ignore[arg-type]  # no proxy needed for the URL
    assert proxy.url("postgresql+psycopg://postgres@127.0.0.1:5432/t_1", 1) == \
        "postgresql+psycopg://postgres@127.0.0.1:2222/t_1"
