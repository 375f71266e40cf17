"""Parameters bounded like Kafka's own types answer 404/422, never 500, and no URL password reaches a body
(issue 23 item 10), on both backends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import Seeded, make_client, make_settings
from tests.api.factory import PROD, STAGING
from tests.fixtures.lanes import examples
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.runtime.wiring import build_runtime

PASSWORD = "hunter2"
LEAKY = f"ConnectError: cannot reach http://scraper:{PASSWORD}@kafka-1:7071/metrics (postgres://txn:{PASSWORD}@db/t)"


@pytest.mark.parametrize(("path", "expected"), [
    pytest.param(f"/console/partitions/{PROD}/orders/{2**64}", 422, id="partition-past-64-bits"),
    pytest.param(f"/console/partitions/{PROD}/orders/{2**31}", 422, id="partition-past-int32"),
    pytest.param(f"/console/partitions/{PROD}/orders/-1", 422, id="negative-partition"),
    # In range, so not 422; no offsets are recorded for it, so the console's "unknown partition" 404.
    pytest.param(f"/console/partitions/{PROD}/orders/{2**31 - 1}", 404, id="largest-partition"),
    pytest.param(f"/console/partitions/{PROD}/or%00ders/0", 422, id="nul-in-topic"),
    pytest.param(f"/console/partitions/{PROD}/{'t' * 250}/0", 422, id="topic-past-249"),
    pytest.param(f"/console/partitions/{'c' * 5000}/orders/0", 404, id="long-cluster"),
    pytest.param(f"/console/transactions/{PROD}/a%00b", 404, id="nul-in-transactional-id"),
    pytest.param(f"/console/transactions/{PROD}/orders-app-0_0?limit={2**64}", 422, id="limit-past-64-bits"),
    pytest.param(f"/console/partitions/{PROD}/orders/0?hours=1e400", 422, id="hours-infinite"),
])
def test_console_parameters_are_bounded(client: TestClient, path: str, expected: int) -> None:
    assert client.get(path).status_code == expected


@pytest.mark.parametrize("path", [
    f"/api/v1/transactions/{PROD}/a%00b", f"/api/v1/consumer-groups/{PROD}/a%00b", "/api/v1/clusters/a%00b",
    f"/api/v1/transactions/{PROD}/{'x' * 40_000}", f"/api/v1/reports/{PROD}/topics?topic=a%00b",
    f"/api/v1/reports/{PROD}/lag?group_id=a%00b", f"/api/v1/reports/{PROD}/offenders?kind=a%00b",
    f"/api/v1/reports/{PROD}/transactions?txn_prefix=a%00b",
    f"/api/v1/reports/{PROD}/offenders?limit={2**64}", "/api/v1/transactions?cluster=a%00b",
    f"/api/v1/transactions?limit={2**64}", "/api/v1/transactions?min_age_seconds=1e400",
    f"/api/v1/verification?window_seconds={2**64}", "/api/v1/lso-stalls?since=99999-01-01",
])
def test_hostile_api_parameters_never_answer_5xx(client: TestClient, path: str) -> None:
    """What schemathesis (tests/api/test_openapi.py) may not draw: NUL bytes, ids past Kafka's 32,767 bytes,
    numbers past 64 bits, dates past year 9999."""
    assert client.get(path).status_code < 500


@given(cluster=st.sampled_from([PROD, STAGING, "x"]), topic=st.text(min_size=1, max_size=300), partition=st.integers(), hours=st.floats(allow_nan=True, allow_infinity=True))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
def test_no_console_partition_url_answers_5xx(client: TestClient, cluster: str, topic: str, partition: int,
                                              hours: float) -> None:
    response = client.get(f"/console/partitions/{cluster}/{quote(topic, safe='')}/{partition}", params={"hours": str(hours)})
    assert response.status_code < 500, response.text


@given(partition=st.integers(), producer_id=st.integers(), coordinator_epoch=st.integers())
@settings(max_examples=examples(25), deadline=None, suppress_health_check=list(HealthCheck))
def test_abort_body_numbers_past_kafka_types_are_422(admin_client: TestClient, partition: int, producer_id: int,
                                                     coordinator_epoch: int) -> None:
    body = dict(cluster=PROD, topic="orders", partition=partition, producer_id=producer_id, producer_epoch=0,
                coordinator_epoch=coordinator_epoch, dry_run=True)
    response = admin_client.post("/api/v1/admin/abort", json=body, headers={"Authorization": "Bearer adm1n"})
    in_range = 0 <= partition < 2**31 and 0 <= producer_id < 2**63 and 0 <= coordinator_epoch < 2**31
    # In range, the body is valid and the dry run reaches the (unreachable) cluster: 503, as documented.
    assert response.status_code == (503 if in_range else 422), response.text


@pytest.fixture(scope="module")
def admin_client(seeded: Seeded) -> Iterator[TestClient]:
    """Aborts against a cluster nobody listens on: the dry run is refused by Kafka as unreachable, after the body
    passed validation (the audit row is written with the numbers given)."""
    settings = make_settings(seeded.url, admin_enabled=True, admin_token="adm1n")
    clusters = [c.model_copy(update={"bootstrap_servers": ["127.0.0.1:9"], "connect_timeout_ms": 100,
                                     "request_timeout_ms": 100}) for c in settings.clusters]
    runtime = build_runtime(settings.model_copy(update={"clusters": clusters}), collect=False)
    try:
        with make_client(runtime) as c:
            yield c
    finally:
        runtime.engine.dispose()


@pytest.fixture
def leaky_runtime(seeded: Seeded) -> Iterator[Runtime]:
    runtime = build_runtime(make_settings(seeded.url), collect=False)
    now_ms = int(time.time() * 1000)
    runtime.state.update(STAGING, up=False, polls=1, last_poll_at_ms=now_ms, last_error=LEAKY)
    yield runtime
    runtime.engine.dispose()


def test_no_url_password_in_cluster_bodies_readyz_or_console(leaky_runtime: Runtime) -> None:
    with make_client(leaky_runtime) as client:
        bodies = {url: client.get(url) for url in ("/api/v1/clusters", f"/api/v1/clusters/{STAGING}", "/readyz",
                                                    "/console")}
    for url, response in bodies.items():
        assert response.status_code in (200, 503), (url, response.text)
        assert "http://scraper:***@kafka-1:7071/metrics" in response.text, url  # what failed is still told
        assert PASSWORD not in response.text, url
