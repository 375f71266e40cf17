"""GET /api/v1/hanging and /api/v1/lso-stalls."""

from __future__ import annotations

from datetime import timedelta

from fastapi.testclient import TestClient

from tests.api.factory import PROD, STAGING, Scenario
from tests.api.helpers import flat, invalid_param, ok, walk


def test_hanging_lists_open_episodes_newest_first(client: TestClient) -> None:
    items = ok(client, "/api/v1/hanging")["items"]
    assert [(i["topic"], i["partition"], i["transactional_id"]) for i in items] == [
        ("orders", 3, None), ("orders", 0, "orders-app-0_0")]
    assert all(i["resolved_at"] is None and i["cluster"] == PROD for i in items)
    assert 40 <= items[0]["hanging_seconds"] < 600
    for item in items:  # one way to count ages: the transaction is at least as old as its last write
        assert item["open_seconds"] >= item["last_write_age_seconds"] > item["hanging_seconds"]
    assert items[0]["abort_command"] == ("txnwatch abort --bootstrap-server kafka-0.prod:9092,kafka-1.prod:9092 "
                                         "--topic orders --partition 3 --start-offset 420 --execute")
    assert items[0]["kafka_abort_command"] == ("kafka-transactions.sh --bootstrap-server kafka-0.prod:9092,"
                                               "kafka-1.prod:9092 abort --topic orders --partition 3 --start-offset 420")
    assert items[0]["invisible_records"] == items[0]["high_watermark"] - items[0]["last_stable_offset"] == 180
    assert [g["group_id"] for g in items[0]["blocked_groups"]] == ["orders-consumer"]
    assert items[0]["reason"] == "unknown_to_coordinator" and "does not know" in items[0]["reason_explanation"]
    assert items[0]["runbook"].endswith("#kafkahangingtransaction")


def test_hanging_with_resolved_episodes_and_pages(client: TestClient) -> None:
    everything = ok(client, "/api/v1/hanging", include_resolved="true")["items"]
    assert len(everything) == 3
    resolved = [i for i in everything if i["resolved_at"]]
    assert [i["transactional_id"] for i in resolved] == ["old-1"]
    assert resolved[0]["hanging_seconds"] == 3600
    pages = walk(client, "/api/v1/hanging", include_resolved="true", limit=1)
    assert [i["id"] for i in flat(pages)] == [i["id"] for i in everything]
    assert ok(client, "/api/v1/hanging", cluster=STAGING)["items"] == []


def test_hanging_cursor_is_tied_to_include_resolved(client: TestClient) -> None:
    cursor = ok(client, "/api/v1/hanging", limit=1)["next_cursor"]
    invalid_param(client, "/api/v1/hanging", "cursor", include_resolved="true", cursor=cursor)
    invalid_param(client, "/api/v1/hanging", "include_resolved", include_resolved="perhaps")
    assert client.get("/api/v1/hanging", params={"cluster": "nope"}).status_code == 404


def test_lso_stalls_open_and_recent(client: TestClient) -> None:
    items = ok(client, "/api/v1/lso-stalls")["items"]
    assert [(i["partition"], i["ended_at"] is None) for i in items] == [(0, True), (1, False)]
    assert [i["id"] for i in flat(walk(client, "/api/v1/lso-stalls", limit=1))] == [i["id"] for i in items]
    assert items[0]["blocking_transactional_id"] == "orders-app-0_0"
    assert items[1]["duration_seconds"] == 400
    assert items[0]["abort_command"].endswith(f"--partition 0 --start-offset {items[0]['stalled_lso']} --execute")
    assert items[0]["invisible_records"] is not None and items[0]["blocked_groups"]


def test_lso_stalls_since(client: TestClient, scenario: Scenario) -> None:
    since = (scenario.now - timedelta(days=5)).isoformat()
    assert [i["partition"] for i in ok(client, "/api/v1/lso-stalls", since=since)["items"]] == [0, 1, 2]
    naive = (scenario.now - timedelta(days=5)).replace(tzinfo=None).isoformat()
    assert len(ok(client, "/api/v1/lso-stalls", since=naive)["items"]) == 3, "naive times are UTC"
    recent = (scenario.now - timedelta(minutes=1)).isoformat()
    assert [i["partition"] for i in ok(client, "/api/v1/lso-stalls", since=recent)["items"]] == [0]
    pages = walk(client, "/api/v1/lso-stalls", since=since, limit=2)
    assert [i["partition"] for i in flat(pages)] == [0, 1, 2]
    assert ok(client, "/api/v1/lso-stalls", cluster=STAGING)["items"] == []


def test_lso_stalls_invalid_since(client: TestClient) -> None:
    invalid_param(client, "/api/v1/lso-stalls", "since", since="last tuesday")
    invalid_param(client, "/api/v1/lso-stalls", "since", since="0001-01-01T00:00:00+05:00")
    cursor = ok(client, "/api/v1/lso-stalls", since="2020-01-01T00:00:00Z", limit=1)["next_cursor"]
    invalid_param(client, "/api/v1/lso-stalls", "cursor", since="2021-01-01T00:00:00Z", cursor=cursor)
