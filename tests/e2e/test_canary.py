"""The transactional canary end to end on a real 3-broker lab: healthy, then its coordinator killed, then back.

The lab keeps ``__transaction_state`` at one replica per partition, so the broker that coordinates the canary's
transactional id takes its partition offline with it: no other broker can take over, and transactions of every
id on that partition cannot commit (what production sees when a ``__transaction_state`` partition is offline or
under its min ISR).  The canary's own topic keeps three replicas, so its partitions move on and only the
coordinator is to blame.

* healthy: the topic is made with one partition led by each broker; rounds commit, and the commit and
  visibility latencies appear on /metrics; no alert;
* the coordinator killed (SIGKILL): "transactions cannot commit" fires naming that broker (and the id's
  ``__transaction_state`` partition once the controller has fenced it), and pages PagerDuty;
* the broker back: rounds commit again and the alert resolves, its page too.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.core.canary import transaction_state_partition
from txnwatch.core.model import TRANSACTION_STATE_TOPIC
from txnwatch.lab.faults import kill_broker

pytestmark = [pytest.mark.lab, pytest.mark.slow]
TOPIC = "_txnwatch_canary"
TID = "txnwatch-canary-e2e"
RULE = "transactions_cannot_commit"


@pytest.fixture(scope="module")
def fragile_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from txnwatch.lab.cluster import start_lab
    from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

    single = {"transaction.state.log.replication.factor": "1", "transaction.state.log.min.isr": "1"}
    lab = start_lab(LabSettings(brokers=3, proxy=False, broker_heap_mb=384,
                                transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS,
                                                                 extra=single)),
                    tmp_path_factory.mktemp("txnwatch-lab-canary"), die_with_parent=True, quiet=True)
    try:
        yield lab
    finally:
        lab.down()


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as pd:
        yield pd


@pytest.fixture
def daemon(fragile_lab: Any, pagerduty: FakePagerDuty, tmp_path: Path) -> Iterator[Daemon]:
    d = start_daemon(
        database_url=f"sqlite:///{tmp_path / 'canary.db'}", poll_interval_seconds=1,
        transaction_log=dict(enabled=False),
        clusters=[dict(name="lab", bootstrap_servers=fragile_lab.bootstrap_servers, request_timeout_ms=3000,
                       connect_timeout_ms=2000,
                       canary=dict(enabled=True, transactional_id=TID, interval_seconds=1, timeout_ms=2000,
                                   transaction_timeout_ms=10_000))],
        pagerduty=dict(enabled=True, routing_key="e2e-routing-key", events_url=pagerduty.url),
        alert_rules={RULE: dict(for_seconds=0)},
    )
    try:
        yield d
    finally:
        d.stop()


def samples(d: Daemon, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for f in text_string_to_metric_families(d.get("/metrics").text)
            for s in f.samples if s.name == name]


def canary_alerts(d: Daemon, state: str | None = None) -> list[dict[str, Any]]:
    items = d.get("/api/v1/alerts", params={"cluster": "lab"}).json()["items"]
    return [a for a in items if a["rule"] == RULE and (state is None or a["state"] == state)]


def test_canary_commits_then_alerts_on_its_coordinator_and_resolves(daemon: Daemon, fragile_lab: Any,
                                                                     pagerduty: FakePagerDuty) -> None:
    lab = fragile_lab
    # Healthy: every broker leads a partition of the canary's topic; rounds commit and are seen.
    leaders = wait_for(lambda: (ls := _leaders(lab)) and ls, 60, what="the canary's topic")
    assert sorted(leaders.values()) == sorted(b.node_id for b in lab.brokers)
    wait_for(lambda: [v for _, v in samples(daemon, "txnwatch_canary_up")] == [1.0], 60, what="a healthy round")
    commits = wait_for(lambda: sum(v for _, v in samples(daemon, "txnwatch_canary_commit_latency_seconds_count"))
                       >= 6 and samples(daemon, "txnwatch_canary_commit_latency_seconds_count"), 60,
                       what="commit latencies")
    assert {labels["leader"] for labels, _ in commits} == {str(b) for b in leaders.values()}
    visible = samples(daemon, "txnwatch_canary_visibility_latency_seconds_count")
    assert sum(v for _, v in visible) >= 3
    coordinator = lab.transaction_coordinator(TID)
    (gauge,) = samples(daemon, "txnwatch_canary_coordinator_broker")
    assert gauge[1] == coordinator
    assert canary_alerts(daemon) == [] and pagerduty.actions() == []
    # The cluster's view says the same: every partition committed and was seen, by the coordinator Kafka names.
    view = wait_for(lambda: (c := daemon.get("/api/v1/clusters/lab").json()["canary"]) and c["ok"] and c, 30,
                    what="the canary in the cluster view")
    assert view["coordinator"] == coordinator and view["failing"] is None
    assert sorted((a["partition"], a["leader"]) for a in view["attempts"]) == sorted(leaders.items())
    assert all(a["commit_ms"] is not None and a["visible_ms"] is not None for a in view["attempts"])

    # The coordinator killed: its __transaction_state partition (one replica) goes with it.
    admin = lab.admin()
    try:
        parts = admin.describe_topics([TRANSACTION_STATE_TOPIC])[0]["partitions"]
    finally:
        admin.close()
    state_partition = transaction_state_partition(TID, len(parts))
    # Kafka's own answer (FindCoordinator) is the leader of the partition txnwatch computes for the id.
    assert {int(p["partition_index"]): int(p["leader_id"]) for p in parts}[state_partition] == coordinator
    down = kill_broker(lab, coordinator, hard=True)
    try:
        (firing,) = wait_for(lambda: canary_alerts(daemon, "firing"), 90, what="transactions cannot commit")
        assert f"broker {coordinator}" in firing["summary"], firing["summary"]
        assert firing["details"]["broker_id"] == coordinator
        assert firing["details"]["transactional_id"] == TID
        # Once the controller has fenced the dead broker, its partition shows no leader, and the finding says so.
        try:
            named = wait_for(lambda: [a for a in canary_alerts(daemon, "firing")
                                      if a["details"]["blame"] == "transaction_state_partition"], 60,
                             what="the __transaction_state partition blamed")
        except AssertionError as exc:  # what the alert and the cluster said instead
            raise AssertionError(f"{exc}; alerts: {canary_alerts(daemon)}; cluster: "
                                 f"{daemon.get('/api/v1/clusters/lab').json()}") from None
        assert named[0]["details"]["transaction_state_partition"] == state_partition
        failing = daemon.get("/api/v1/clusters/lab").json()["canary"]["failing"]
        assert failing is not None and failing["broker_id"] == coordinator, failing
        assert 'data-testid="canary" data-ok="false"' in daemon.get("/console").text
        assert f"{TRANSACTION_STATE_TOPIC}-{state_partition} has no leader" in named[0]["details"]["blame_text"]
        wait_for(lambda: ("trigger", firing["incident_key"]) in pagerduty.actions(), 30, what="the page")
        failures = samples(daemon, "txnwatch_canary_failures_total")
        assert any(labels["coordinator"] in (str(coordinator), "none") and v > 0 for labels, v in failures), failures
    finally:
        down.clear()

    # Back: rounds commit again, the alert and its page resolve.
    wait_for(lambda: canary_alerts(daemon, "resolved"), 90, what="the alert resolved")
    assert canary_alerts(daemon, "firing") == []
    wait_for(lambda: ("resolve", firing["incident_key"]) in pagerduty.actions(), 30, what="the page resolved")
    wait_for(lambda: [v for _, v in samples(daemon, "txnwatch_canary_up")] == [1.0], 30, what="healthy again")


def _leaders(lab: Any) -> dict[int, int] | None:
    admin = lab.admin()
    try:
        described = admin.describe_topics([TOPIC])
    finally:
        admin.close()
    parts = described[0].get("partitions") if described else None
    if not parts:
        return None
    return {int(p["partition_index"]): int(p["leader_id"]) for p in parts}
