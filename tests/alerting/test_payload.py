"""Pure parts: PagerDuty bodies, dedup keys, response classification, condition helpers."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from tests.alerting.fake_pagerduty import validate
from txnwatch.alerting.conditions import (
    abort_at_offset_command,
    abort_command,
    cluster_down,
    partition_incident_key,
    runbook_link,
)
from txnwatch.alerting.pagerduty import EventContext, classify, pagerduty_event
from txnwatch.alerting.snapshot import alert_snapshot, dedup_key
from txnwatch.store import models as m

NOW = datetime(2026, 11, 23, 1, 0, tzinfo=timezone.utc)


def event_from_alert(alert: m.Alert, action: str, routing_key: str,
                     context: EventContext = EventContext()) -> dict[str, Any]:
    """The body the notifier sends for an outbox row: the row's payload is the alert's snapshot."""
    return pagerduty_event(alert_snapshot(alert), action, routing_key, context)


def alert(**overrides: object) -> m.Alert:
    fields = dict(id=7, cluster_id=1, rule="hanging_transaction", incident_key="hanging_transaction/prod/orders-0/pid=5",
                  state="firing", severity="critical", summary="hanging", labels={"cluster": "prod", "topic": "orders"},
                  details={"producer_id": 5, "runbook": "docs/runbooks.md#kafkahangingtransaction"}, started_at=NOW,
                  fired_at=NOW, resolved_at=None, last_seen_at=NOW)
    fields.update(overrides)
    return m.Alert(**fields)


def test_trigger_body_is_valid_events_v2() -> None:
    body = event_from_alert(alert(), "trigger", "key", EventContext("txnwatch", "https://txnwatch.example/alerts",
                                                                    "https://git.example/txnwatch/blob/main"))
    assert validate(body) is None
    assert body["dedup_key"] == "hanging_transaction/prod/orders-0/pid=5"
    assert body["payload"] | {"custom_details": None} == {
        "summary": "hanging", "source": "txnwatch/prod", "severity": "critical", "component": "orders",
        "group": "prod", "class": "hanging_transaction", "timestamp": "2026-11-23T01:00:00+00:00",
        "custom_details": None}
    assert body["payload"]["custom_details"]["producer_id"] == 5
    assert body["client"] == "txnwatch" and body["client_url"] == "https://txnwatch.example/alerts"
    assert body["links"] == [{"href": "https://git.example/txnwatch/blob/main/docs/runbooks.md#kafkahangingtransaction",
                               "text": "Runbook: hanging_transaction"}]


def test_relative_runbook_becomes_an_absolute_link_and_summary_is_capped() -> None:
    body = event_from_alert(alert(summary="x" * 5000), "trigger", "key")
    assert body["links"][0]["href"].startswith("https://") and body["links"][0]["href"].endswith(
        "runbooks.md#kafkahangingtransaction")  # PagerDuty drops relative links
    assert len(body["payload"]["summary"]) == 1024 and validate(body) is None


def test_resolve_body_is_minimal() -> None:
    body = event_from_alert(alert(state="resolved"), "resolve", "key")
    assert body == {"routing_key": "key", "event_action": "resolve",
                    "dedup_key": "hanging_transaction/prod/orders-0/pid=5"}


def test_unknown_severity_falls_back_to_critical() -> None:
    snapshot = {"incident_key": "k", "rule": "r", "severity": "page-me", "summary": "s"}
    assert pagerduty_event(snapshot, "trigger", "key")["payload"]["severity"] == "critical"


def test_dedup_key_is_stable_and_short() -> None:
    long_key = "hanging_transaction/prod/" + "t" * 600 + "-0/pid=1"
    assert len(dedup_key(long_key)) == 255 and dedup_key(long_key) == dedup_key(long_key)
    assert dedup_key(long_key) != dedup_key(long_key.replace("pid=1", "pid=2"))
    assert dedup_key("short") == "short"


def test_classify() -> None:
    assert classify(202, "").outcome == "sent"
    assert classify(400, "bad").outcome == "failed"
    assert classify(403, "").outcome == "failed"
    assert classify(404, "").outcome == "failed"
    assert classify(429, "", "30").outcome == "retry" and classify(429, "", "30").retry_after_seconds == 30
    assert classify(500, "").outcome == "retry" and classify(503, "").outcome == "retry"
    assert classify(200, "").outcome == "failed"  # not the Events v2 endpoint


def test_condition_helpers() -> None:
    assert partition_incident_key("lso_stall", "prod", "orders", 3, 42) == "lso_stall/prod/orders-3/pid=42"
    assert runbook_link("lso_stall") == "docs/runbooks.md#kafkalsostalled"
    assert abort_command("b:9092", "my topic", 1, 2, 3, 4) == (
        "kafka-transactions.sh --bootstrap-server b:9092 abort --topic 'my topic' --partition 1 "
        "--producer-id 2 --producer-epoch 3 --coordinator-epoch 4")
    assert abort_at_offset_command("b:9092", "t", 0, 17) == (
        "kafka-transactions.sh --bootstrap-server b:9092 abort --topic t --partition 0 --start-offset 17")
    assert runbook_link("nope") == "docs/runbooks.md"
    down = cluster_down("prod", "no brokers")
    assert down.incident_key == "cluster_down/prod" and down.details["runbook"] == "docs/runbooks.md#txnwatchclusterunreachable"
