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


def test_verification_shows_the_brokers_own_figures_beside_txnwatchs(seeded) -> None:
    """The brokers' VerificationTimeMs / VerificationFailureRate from their JMX exporters, as of the latest poll;
    a broker whose exporter failed is listed with its error and left out of the sums."""
    from tests.api.conftest import make_client, make_settings
    from txnwatch.core.model import BrokerVerification, ClusterSnapshot
    from txnwatch.runtime.wiring import build_runtime

    runtime = build_runtime(make_settings(seeded.url), collect=False)
    figures = (BrokerVerification("1", "http://b1/metrics", verifications=1073, failures=9, time_ms_max=187.0,
                                  time_ms_quantiles=((0.5, 1.0), (0.99, 19.7)), failures_per_second_1m=0.02),
               BrokerVerification("2", "http://b2/metrics", verifications=27, failures=1,
                                  time_ms_quantiles=((0.5, 2.0), (0.99, 4.0))),
               BrokerVerification("3", "http://b3/metrics", error="ConnectError: refused"))
    runtime.state.update(PROD, snapshot=ClusterSnapshot(cluster=PROD, taken_at_ms=1_795_000_000_000, duration_ms=5,
                                                        broker_verification=figures))
    try:
        with make_client(runtime) as client:
            stats = {s["cluster"]: s for s in ok(client, "/api/v1/verification")["clusters"]}
    finally:
        runtime.engine.dispose()
    brokers = stats[PROD]["brokers"]
    assert brokers["configured"] and brokers["brokers_up"] == 2
    assert (brokers["verifications"], brokers["failures"]) == (1100, 10)
    assert brokers["failure_ratio"] == pytest.approx(10 / 1100) and brokers["time_ms_p99_max"] == 19.7
    assert [(b["broker"], b["up"], b["time_ms_p99"]) for b in brokers["brokers"]] == [
        ("1", True, 19.7), ("2", True, 4.0), ("3", False, None)]
    assert brokers["brokers"][2]["error"] == "ConnectError: refused"
    assert stats[PROD]["samples"] == 105  # txnwatch's own partition-side figures are still there, beside them
    assert stats[STAGING]["brokers"] == {**stats[STAGING]["brokers"], "configured": False, "brokers": []}
