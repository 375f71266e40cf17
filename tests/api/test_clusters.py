"""GET /api/v1/clusters: the clusters table merged with this replica's latest poll."""

from __future__ import annotations

import time

from fastapi.testclient import TestClient

from tests.api.conftest import Seeded, make_client, make_settings
from tests.api.factory import BOOTSTRAP, PROD, STAGING
from tests.api.helpers import ok
from txnwatch.runtime.wiring import build_runtime

URL = "/api/v1/clusters"


def test_lists_configured_clusters_with_poll_status(client: TestClient) -> None:
    clusters = {c["name"]: c for c in ok(client, URL)}
    assert list(clusters) == [PROD, STAGING]
    prod, staging = clusters[PROD], clusters[STAGING]
    assert prod["bootstrap_servers"] == BOOTSTRAP[PROD]
    assert prod["up"] is True and prod["last_error"] is None
    assert (prod["polls"], prod["failed_polls"]) == (6, 1)
    assert staging["up"] is False and staging["last_error"].startswith("NoBrokersAvailable")
    assert staging["last_success_at"] < staging["last_poll_at"]


def test_one_cluster_counts_what_needs_attention(client: TestClient) -> None:
    prod = ok(client, f"{URL}/{PROD}")
    open_txns = ok(client, "/api/v1/transactions", cluster=PROD, state=["Ongoing", "PrepareCommit", "PrepareAbort"],
                   limit=1000)["items"]
    assert prod["open_transactions"] == len(open_txns)
    assert (prod["hanging_open"], prod["lso_stalls_open"], prod["alerts_firing"]) == (2, 1, 1)
    staging = ok(client, f"{URL}/{STAGING}")
    assert (staging["open_transactions"], staging["hanging_open"], staging["alerts_firing"]) == (3, 0, 1)


def test_unknown_cluster_is_404(client: TestClient) -> None:
    response = client.get(f"{URL}/nope")
    assert response.status_code == 404
    assert response.json()["detail"] == f"unknown cluster 'nope'; known: {PROD}, {STAGING}"


def test_a_fresher_poll_in_this_replica_wins_over_the_database(seeded: Seeded) -> None:
    """While the database is down the collector keeps polling; the API must not show stale status."""
    runtime = build_runtime(make_settings(seeded.url), collect=False)
    now_ms = int(time.time() * 1000)
    runtime.state.update(STAGING, up=True, polls=1, last_poll_at_ms=now_ms, last_success_at_ms=now_ms, last_error=None)
    runtime.state.update(PROD, up=False, polls=1, last_poll_at_ms=now_ms - 3_600_000, last_error="stale view")
    try:
        with make_client(runtime) as client:
            clusters = {c["name"]: c for c in ok(client, URL)}
    finally:
        runtime.engine.dispose()
    assert clusters[STAGING]["up"] is True and clusters[STAGING]["last_error"] is None
    assert clusters[STAGING]["last_success_at"] == clusters[STAGING]["last_poll_at"]
    assert clusters[PROD]["up"] is True, "an older in-memory view must not override the database"


def test_configured_cluster_never_polled(seeded: Seeded) -> None:
    settings = make_settings(seeded.url)
    settings = settings.model_copy(update={"clusters": [*settings.clusters,
                                                        settings.clusters[0].model_copy(update={"name": "dr"})]})
    runtime = build_runtime(settings, collect=False)
    try:
        with make_client(runtime) as client:
            dr = ok(client, f"{URL}/dr")
            assert (dr["up"], dr["polls"], dr["last_poll_at"], dr["open_transactions"]) == (False, 0, None, 0)
            for url in ("/api/v1/transactions", "/api/v1/hanging", "/api/v1/lso-stalls", "/api/v1/partitions",
                        "/api/v1/consumer-groups", "/api/v1/alerts"):
                assert ok(client, url, cluster="dr")["items"] == [], url
            assert ok(client, "/api/v1/verification", cluster="dr")["clusters"][0]["samples"] == 0
            assert client.get("/api/v1/transactions/dr/orders-app-0_0").status_code == 404
            assert client.get("/api/v1/consumer-groups/dr/orders-consumer").status_code == 404
    finally:
        runtime.engine.dispose()


def test_cluster_detail_names_failed_requests_with_kip1050_advice(seeded: Seeded) -> None:
    """The latest poll's failed requests, each with its KIP-1050 class and what to do (the Kafka layer sets
    both), so an operator sees why part of the cluster is unknown."""
    from kafka.errors import TransactionalIdAuthorizationFailedError

    from txnwatch.core.model import ClusterSnapshot
    from txnwatch.kafka.error_classes import classify
    from txnwatch.kafka.errors import from_code, from_exception

    denied = from_code("DescribeTransactions", "payments-1", TransactionalIdAuthorizationFailedError.errno)
    refused = from_exception("ListTransactions", "broker:2", ConnectionRefusedError("refused"))
    runtime = build_runtime(make_settings(seeded.url), collect=False)
    now_ms = int(time.time() * 1000)
    runtime.state.update(PROD, up=True, polls=1, last_poll_at_ms=now_ms, last_success_at_ms=now_ms,
                         snapshot=ClusterSnapshot(cluster=PROD, taken_at_ms=now_ms, duration_ms=5,
                                                  errors=(denied, refused)))
    try:
        with make_client(runtime) as client:
            errors = ok(client, f"{URL}/{PROD}")["request_errors"]
    finally:
        runtime.engine.dispose()
    assert [(e["api"], e["target"], e["error_class"]) for e in errors] == [
        ("DescribeTransactions", "payments-1", "invalid-configuration"), ("ListTransactions", "broker:2", "unknown")]
    assert errors[0]["advice"] == classify("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")[1] and "Describe" in errors[0]["advice"]
    assert errors[1]["advice"] == "" and "refused" in errors[1]["message"]


def test_cluster_detail_says_what_the_group_caps_left_out(seeded: Seeded) -> None:
    """The API lists the capped groups (lag rows), so the cluster says how many it does not list, and why."""
    from txnwatch.core.findings import Findings
    from txnwatch.core.model import ClusterSnapshot

    runtime = build_runtime(make_settings(seeded.url), collect=False)
    now_ms = int(time.time() * 1000)
    findings = Findings(PROD, now_ms, omitted={("consumer_group", "cap"): 4500, ("group_partition", "cap"): 13500,
                                               ("consumer_group", "filter"): 0})
    runtime.state.update(PROD, up=True, polls=1, last_poll_at_ms=now_ms, last_success_at_ms=now_ms,
                         snapshot=ClusterSnapshot(cluster=PROD, taken_at_ms=now_ms, duration_ms=5), findings=findings)
    try:
        with make_client(runtime) as client:
            omitted = ok(client, f"{URL}/{PROD}")["omitted"]
            untouched = ok(client, f"{URL}/{STAGING}")["omitted"]
    finally:
        runtime.engine.dispose()
    assert omitted == [{"kind": "consumer_group", "reason": "cap", "count": 4500},
                       {"kind": "group_partition", "reason": "cap", "count": 13500}]
    assert untouched == []


def test_history_gaps_are_served_with_their_span_and_shown_on_the_console(seeded: Seeded) -> None:
    """A compaction gap the tail found reaches the API (offsets, records, times) and the console's Now page."""
    from txnwatch.core.views import HistoryGap, HistoryView

    runtime = build_runtime(make_settings(seeded.url), collect=False)
    gap = HistoryGap(log_partition=7, first_offset=120, last_offset=179, after_ms=1_700_000_000_000,
                     before_ms=1_700_000_600_000)
    runtime.state.update(PROD, history=HistoryView(mode="exact", reason="reading the transaction log", gaps=(gap,),
                                                   gap_count=1, gap_records=60))
    try:
        with make_client(runtime) as client:
            prod = ok(client, f"{URL}/{PROD}")
            listed = {c["name"]: c for c in ok(client, URL)}
            html = client.get("/console").text
    finally:
        runtime.engine.dispose()
    assert prod["history_gaps"] == [{"log_partition": 7, "first_offset": 120, "last_offset": 179, "records": 60,
                                     "after": "2023-11-14T22:13:20Z", "before": "2023-11-14T22:23:20Z"}]
    assert listed[PROD]["history_gaps"] == prod["history_gaps"] and listed[STAGING]["history_gaps"] == []
    assert 'data-testid="history-gaps"' in html and "120&ndash;179" in html and "lower bounds" in html


def test_the_cluster_view_names_its_known_hazards_and_the_ids_nearest_epoch_exhaustion(seeded: Seeded) -> None:
    """A 4.1 broker with transaction.version 2 (KAFKA-20310 and KAFKA-20090) beside a 4.4 one: the cluster carries
    both; the headroom shows the 5 ids nearest 32,767 only; /metrics says the same."""
    from txnwatch.core.model import BrokerRelease, ClusterSnapshot, TransactionDescription, TxnState

    described = {f"app-{i}": TransactionDescription(f"app-{i}", 1, TxnState.EMPTY, 40 + i, 32_000 + i, 60_000, None)
                 for i in range(8)}
    runtime = build_runtime(make_settings(seeded.url), collect=False)
    runtime.state.update(PROD, snapshot=ClusterSnapshot(
        cluster=PROD, taken_at_ms=1, duration_ms=1, transactions=described,
        broker_releases=(BrokerRelease(1, (4, 1), transaction_version=2), BrokerRelease(2, (4, 4), True, 2))))
    try:
        with make_client(runtime) as client:
            prod = ok(client, f"{URL}/{PROD}")
            staging = ok(client, f"{URL}/{STAGING}")
            metrics = client.get("/metrics").text
    finally:
        runtime.engine.dispose()
    assert [h["hazard"] for h in prod["known_hazards"]] == ["kafka_20310", "kafka_20090"]
    assert prod["brokers_release"] == [{"broker": 1, "release": "4.1", "transaction_version": 2},
                                       {"broker": 2, "release": "4.4+", "transaction_version": 2}]
    assert [(h["transactional_id"], h["headroom"]) for h in prod["epoch_headroom"]] == [
        (f"app-{i}", 32_767 - 32_000 - i) for i in (7, 6, 5, 4, 3)]
    assert (staging["known_hazards"], staging["epoch_headroom"]) == ([], [])
    assert f'txnwatch_known_hazard{{cluster="{PROD}",hazard="kafka_20310"}} 1.0' in metrics
    assert metrics.count("txnwatch_producer_epoch_headroom{") == 5
    assert f'txnwatch_producer_epoch_headroom{{cluster="{PROD}",transactional_id="app-7"}} 760.0' in metrics


def test_the_cluster_view_and_the_console_show_the_canary_healthy_then_blaming_its_coordinator(
        seeded: Seeded) -> None:
    """The canary's rounds reach GET /api/v1/clusters/{name} and the Now page: latencies per partition while it
    commits, then the finding with the broker to blame once its coordinator is lost; a cluster without a canary
    has none."""
    from tests.unit.test_canary_probe import NOT_AVAILABLE, SETTINGS, Clock, FakeKafka
    from txnwatch.canary.probe import ClusterCanary
    from txnwatch.core.canary import CoordinatorLocation

    runtime = build_runtime(make_settings(seeded.url), collect=False)
    clock = Clock()
    kafka = FakeKafka(clock)
    probe = ClusterCanary(PROD, SETTINGS, lambda: kafka, publish=lambda view: runtime.state.update(PROD, canary=view),
                          wall_ms=clock, mono_ms=clock)
    try:
        with make_client(runtime) as client:
            first = probe.run_round()
            healthy = ok(client, f"{URL}/{PROD}")["canary"]
            healthy_html = client.get("/console").text
            kafka.coordinator = CoordinatorLocation(None, 7, None, (2,), NOT_AVAILABLE)
            probe.run_round()
            probe.run_round()
            failing = ok(client, f"{URL}/{PROD}")["canary"]
            failing_html = client.get("/console").text
            staging = ok(client, f"{URL}/{STAGING}")
    finally:
        runtime.engine.dispose()
    assert healthy["ok"] is True and healthy["failing"] is None and healthy["coordinator"] == 2
    assert healthy["transactional_id"] == SETTINGS.transactional_id and healthy["topic"] == SETTINGS.topic
    assert first is not None and all(a.visible_ms for a in first.attempts)
    assert [(a["partition"], a["leader"], a["ok"], a["commit_ms"], a["visible_ms"]) for a in healthy["attempts"]] == [
        (p, leader, True, 15, a.visible_ms) for (p, leader), a in zip([(0, 1), (1, 2), (2, 3)], first.attempts, strict=True)]
    assert 'data-testid="canary" data-ok="true"' in healthy_html and "canary commits" in healthy_html
    assert failing["ok"] is False and failing["failing"]["failed_rounds"] == 2
    assert failing["failing"]["blame"] == "transaction_state_partition" and failing["failing"]["broker_id"] == 2
    assert failing["failing"]["error"] == "COORDINATOR_NOT_AVAILABLE"
    # The round ends at its first partition: without a coordinator no other can commit.
    assert failing["attempts"] == [{"partition": 0, "leader": 1, "ok": False, "commit_ms": None, "visible_ms": None,
                                    "stage": "init", "error": "REQUEST_TIMED_OUT", "error_class": "retriable",
                                    "message": ""}]
    assert "transactions cannot commit" in failing_html and "__transaction_state-7 has no leader" in failing_html
    assert staging["canary"] is None
