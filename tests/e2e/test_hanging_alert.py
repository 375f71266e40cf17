"""The classic pre-KIP-890 hanging transaction, end to end on a real lab cluster and real PostgreSQL.

Kafka shows it, txnwatch finds it like Kafka's own find-hanging does, pins the LSO
stall on its producer, pages exactly once through a local PagerDuty Events v2
endpoint, and resolves exactly once after an admin abort, though txnwatch restarts in
the middle of the incident and PagerDuty answers 500 and 429 before it takes the resolve.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.lab.faults import inject_hanging_transaction
from txnwatch.lab.reference import KafkaTransactionsTool

pytestmark = pytest.mark.lab
ADMIN_TOKEN = "e2e-admin-token"


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as pd:
        yield pd


@pytest.fixture
def start(lab_cluster: Any, postgres_url: str, pagerduty: FakePagerDuty) -> Iterator[Callable[[], Daemon]]:
    """Starts txnwatch on the shared database; called again, it is a restarted instance."""
    from txnwatch.store.migrate import upgrade

    upgrade(postgres_url)
    started: list[Daemon] = []

    def one() -> Daemon:
        started.append(start_daemon(
            database_url=postgres_url, poll_interval_seconds=1,
            clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)],
            detection=dict(lso_stall_seconds=3, prepare_stuck_seconds=60),
            pagerduty=dict(enabled=True, routing_key="e2e-routing-key", events_url=pagerduty.url),
            alert_rules=dict(hanging_transaction=dict(for_seconds=2), lso_stall=dict(for_seconds=2)),
            api=dict(admin_enabled=True, admin_token=ADMIN_TOKEN),
        ))
        return started[-1]

    try:
        yield one
    finally:
        for d in started:
            d.stop()


def hanging_on(d: Daemon, topic: str, include_resolved: bool = False) -> list[dict[str, Any]]:
    params: dict[str, Any] = {"cluster": "lab", "include_resolved": str(include_resolved).lower()}
    return [h for h in d.get("/api/v1/hanging", params=params).json()["items"] if h["topic"] == topic]


def stalls_on(d: Daemon, topic: str) -> list[dict[str, Any]]:
    return [s for s in d.get("/api/v1/lso-stalls", params={"cluster": "lab"}).json()["items"] if s["topic"] == topic]


def metric(d: Daemon, name: str) -> list[tuple[dict[str, str], float]]:
    return [(s.labels, s.value) for f in text_string_to_metric_families(d.get("/metrics").text)
            for s in f.samples if s.name == name]


def alerts(d: Daemon) -> list[dict[str, Any]]:
    return d.get("/api/v1/alerts", params={"cluster": "lab"}).json()["items"]


def polls(d: Daemon) -> int:
    return int(d.get("/api/v1/clusters/lab").json()["polls"])


def test_hanging_transaction_found_paged_aborted_resolved(start: Callable[[], Daemon], lab_cluster: Any,
                                                          pagerduty: FakePagerDuty,
                                                          new_topic: Callable[..., str]) -> None:
    daemon = start()
    topic = new_topic(partitions=2)
    fault = inject_hanging_transaction(lab_cluster.bootstrap_servers, topic, 1)
    max_timeout_s = lab_cluster.transaction_max_timeout_ms / 1000

    (found,) = wait_for(lambda: hanging_on(daemon, topic), max_timeout_s + 30, what="the hanging transaction")
    assert (found["partition"], found["producer_id"], found["producer_epoch"]) == (1, fault.producer_id, fault.producer_epoch)
    assert found["transactional_id"] == fault.transactional_id
    assert found["reason"] == "partition_not_listed"
    assert found["txn_start_offset"] == fault.first_offset

    reference = KafkaTransactionsTool(lab_cluster.bootstrap_servers, lab_cluster.kafka_version)
    rows = reference.find_hanging(topic=topic, max_transaction_timeout_min=0)
    assert [(r["topic"], r["partition"], r["producer_id"], r["producer_epoch"]) for r in rows] == [
        (topic, 1, fault.producer_id, fault.producer_epoch)]

    (stall,) = wait_for(lambda: stalls_on(daemon, topic), 30, what="the LSO stall episode")
    assert stall["ended_at"] is None and stall["stalled_lso"] == fault.first_offset
    assert stall["blocking_producer_id"] == fault.producer_id

    # One root cause, one page: the LSO stall (seen first) and the hanging transaction of the same producer
    # are one incident, whichever of them paged first; the other rides along in its details.
    def topic_pages() -> list[tuple[str, str]]:
        return [a for a in pagerduty.actions() if topic in a[1]]

    wait_for(lambda: any(action == "trigger" for action, _ in topic_pages()), 30, what="the PagerDuty trigger")
    key = topic_pages()[0][1]
    assert set(topic_pages()) == {("trigger", key)}  # a trigger, perhaps already its update: one dedup key
    trigger = next(e for e in pagerduty.accepted if e["dedup_key"] == key)
    details = trigger["payload"]["custom_details"]
    assert fault.producer_id in (details.get("producer_id"), details.get("blocking_producer_id"))
    assert details["incident_group"] == f"lab/pid={fault.producer_id}"

    def incident_findings() -> list[dict[str, Any]]:
        (alert,) = [a for a in alerts(daemon) if a["incident_key"] == key]
        return [{"rule": alert["root_cause"], "details": alert["details"]}, *alert["details"].get("related", [])]

    both = wait_for(lambda: (f := incident_findings()) and {"hanging_transaction", "lso_stall"} <= {
        x["rule"] for x in f} and f, 30, what="the hanging transaction to join the incident")
    (hanging_details,) = [x["details"] for x in both if x["rule"] == "hanging_transaction"]
    assert hanging_details["transactional_id"] == fault.transactional_id
    assert "kafka-transactions.sh" in hanging_details["suggested_action"]
    # Titled by its root cause everywhere: the API, and PagerDuty (the first trigger, or an update with the same
    # dedup key when the stall paged first: README's "hanging-transaction alert about a minute later").
    (alert,) = [a for a in alerts(daemon) if a["incident_key"] == key]
    assert alert["root_cause"] == "hanging_transaction" and alert["title"] == "Hanging transaction"
    related = alert["summary"].rpartition("related: ")[2]  # the topic's own name may hold a rule id's words
    assert alert["summary"].startswith("[lab] hanging transaction on") and related in ("LSO stalled)", alert["summary"])
    last = wait_for(lambda: [e for e in pagerduty.accepted if e["dedup_key"] == key and "hanging transaction on"
                             in e["payload"]["summary"]], 30, what="the page titled by its root cause")
    assert last[-1]["payload"]["custom_details"]["root_cause"] == "hanging_transaction"
    triggers = topic_pages()
    assert set(triggers) == {("trigger", key)} and len(triggers) <= 2, "one incident: at most an update, never a new one"
    labels = [lbl for lbl, _ in metric(daemon, "txnwatch_hanging_transaction_age_seconds") if lbl["topic"] == topic]
    assert labels and labels[0]["producer_id"] == str(fault.producer_id)

    # Restart in the middle of the incident: the new instance sees the same hanging transaction, pages no more.
    daemon.stop()
    daemon = start()
    seen = polls(daemon)
    wait_for(lambda: polls(daemon) >= seen + 5, 60, what="five polls by the restarted daemon")
    assert topic_pages() == triggers, "the restart paged nothing new"
    # The partition is also a verification failure (pending: its `for:` is 5 min); the restart did not reset it.
    verification = [(a["state"], a["resolved_at"]) for a in alerts(daemon) if a["rule"] == "verification_failure_rate"]
    assert verification == [("pending", None)], verification
    # PagerDuty in trouble for a while: what is queued goes out once it recovers.
    pagerduty.fail_next(500, 1)
    pagerduty.fail_next(429, 1)
    requests_before = pagerduty.requests

    body = {"cluster": "lab", "topic": topic, "partition": 1, "producer_id": fault.producer_id,
            "producer_epoch": fault.producer_epoch}
    auth = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    dry = daemon.client_post("/api/v1/admin/abort", json=body, headers=auth)
    assert dry.status_code == 200 and dry.json()["dry_run"] and not dry.json()["aborted"], dry.text
    real = daemon.client_post("/api/v1/admin/abort", json={**body, "dry_run": False}, headers=auth)
    assert real.status_code == 200 and real.json()["aborted"], real.text

    wait_for(lambda: ("resolve", key) in pagerduty.actions(), 60, what="the PagerDuty resolve")
    wait_for(lambda: not hanging_on(daemon, topic), 30, what="the hanging episode to resolve")
    (closed,) = wait_for(lambda: [s for s in stalls_on(daemon, topic) if s["ended_at"]], 30, what="the stall to end")
    assert closed["max_gap"] >= 1
    wait_for(lambda: len(topic_pages()) >= len(triggers) + 1, 10, what="all of the topic's pages")
    assert topic_pages() == [*triggers, ("resolve", key)]  # one incident, paged (and retitled), resolved once
    assert pagerduty.requests >= requests_before + 3 and not pagerduty.failures  # both refusals were retried
    wait_for(lambda: not [lbl for lbl, _ in metric(daemon, "txnwatch_hanging_transaction_age_seconds")
                          if lbl["topic"] == topic], 30, what="the hanging series to vanish")
