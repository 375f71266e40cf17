"""GET /api/v1/verification and /api/v1/alerts."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.api.factory import PROD, STAGING, Scenario
from tests.api.helpers import flat, invalid_param, ok, walk


def test_verification_distribution_and_failure_rate(client: TestClient) -> None:
    stats = {s["cluster"]: s for s in ok(client, "/api/v1/verification")["clusters"]}
    prod = stats[PROD]
    assert (prod["samples"], prod["timed"], prod["failed"]) == (105, 100, 5)
    # Nearest rank over 1..100 ms, on both backends alike.
    assert (prod["verification_ms_p50"], prod["verification_ms_p95"], prod["verification_ms_p99"],
            prod["verification_ms_max"]) == (50, 95, 99, 100)
    assert prod["failure_rate"] == pytest.approx(5 / 105)
    assert prod["window_seconds"] == 3600
    assert stats[STAGING]["samples"] == 0 and stats[STAGING]["failure_rate"] is None


def test_verification_window(client: TestClient) -> None:
    day = ok(client, "/api/v1/verification", cluster=PROD, window_seconds=86400)["clusters"]
    assert len(day) == 1
    assert (day[0]["samples"], day[0]["verification_ms_max"]) == (106, 99_999)
    invalid_param(client, "/api/v1/verification", "window_seconds", window_seconds=59)
    invalid_param(client, "/api/v1/verification", "window_seconds", window_seconds=10**12)


def test_alerts_newest_first_with_filters(client: TestClient, scenario: Scenario) -> None:
    everything = ok(client, "/api/v1/alerts")["items"]
    assert len(everything) == scenario.alerts
    assert [a["started_at"] for a in everything] == sorted((a["started_at"] for a in everything), reverse=True)
    assert everything[-1]["cluster"] is None, "alerts about txnwatch itself are listed without a cluster filter"
    firing = ok(client, "/api/v1/alerts", state="firing")["items"]
    assert {(a["cluster"], a["rule"]) for a in firing} == {(PROD, "hanging_transaction"), (STAGING, "cluster_down")}
    assert len(ok(client, "/api/v1/alerts", state=["firing", "pending"])["items"]) == 3
    prod = ok(client, "/api/v1/alerts", cluster=PROD)["items"]
    assert {a["cluster"] for a in prod} == {PROD} and len(prod) == 3
    assert prod[0]["labels"] == {"rule": "hanging_transaction"}


def test_alert_pages_and_invalid_state(client: TestClient) -> None:
    everything = ok(client, "/api/v1/alerts")["items"]
    assert flat(walk(client, "/api/v1/alerts", limit=2)) == everything
    invalid_param(client, "/api/v1/alerts", "state", state="acknowledged")
