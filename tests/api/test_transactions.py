"""GET /api/v1/transactions and /api/v1/transactions/{cluster}/{transactional_id}, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import json
from datetime import datetime, timezone

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.conftest import make_client, make_settings
from tests.api.factory import BULK, PROD, STAGING, Factory, Scenario
from tests.api.helpers import flat, invalid_param, ok, walk
from tests.fixtures.migrated import migrate
from txnwatch.runtime.wiring import build_runtime
from txnwatch.store.db import make_engine

URL = "/api/v1/transactions"
OPEN = {"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"}


def ids(items: list[dict]) -> list[str]:
    return [i["transactional_id"] for i in items]


def test_lists_every_listed_transaction_of_every_cluster_and_hides_expired_ones(client: TestClient,
                                                                                scenario: Scenario) -> None:
    items = ok(client, URL, limit=1000)["items"]
    expected = scenario.transactions[PROD] + scenario.transactions[STAGING]
    assert sorted(ids(items)) == sorted(expected)
    assert "expired-1" not in ids(items)
    assert {i["cluster"] for i in items} == {PROD, STAGING}


def test_default_order_is_oldest_open_transaction_first(client: TestClient) -> None:
    items = ok(client, URL, limit=1000)["items"]
    ages = [i["age_seconds"] for i in items]
    with_age = [a for a in ages if a is not None]
    assert with_age == sorted(with_age, reverse=True)
    assert ages[: len(with_age)] == with_age, "transactions without an age come last"
    by_id = {i["transactional_id"]: i for i in items}
    assert by_id["orders-app-0_0"]["age_seconds"] == pytest.approx(120, abs=60)
    assert by_id["idle-1"]["age_seconds"] is None  # Empty
    assert by_id["done-1"]["age_seconds"] is None  # CompleteCommit: no open transaction


@pytest.mark.parametrize(("sort", "order"), [("age", None), ("age", "asc"), ("transactional_id", None),
                                        ("transactional_id", "desc"), ("state", "asc"), ("state", "desc")])
def test_pages_cover_everything_once_in_sort_order(client: TestClient, sort: str, order: str | None) -> None:
    params = {"sort": sort, **({"order": order} if order else {})}
    whole = ok(client, URL, limit=1000, **params)["items"]
    pages = walk(client, URL, limit=17, **params)
    assert all(len(p) == 17 for p in pages[:-1])
    walked = flat(pages)
    assert len(set(ids(walked))) == len(walked), "a transaction appeared twice"
    assert ids(walked) == ids(whole)
    if sort == "state":
        states = [i["state"] for i in walked]
        assert states == sorted(states, reverse=order == "desc")


def test_pages_of_a_filtered_list(client: TestClient) -> None:
    params = dict(cluster=PROD, state=["Ongoing", "PrepareAbort"], sort="transactional_id")
    walked = flat(walk(client, URL, limit=10, **params))
    assert len(walked) == len(ok(client, URL, limit=1000, **params)["items"]) > 10
    assert {i["state"] for i in walked} == {"Ongoing", "PrepareAbort"}


def test_state_filter_is_repeatable(client: TestClient) -> None:
    items = ok(client, URL, limit=1000, state=["PrepareCommit", "PrepareAbort"])["items"]
    assert {i["state"] for i in items} == {"PrepareCommit", "PrepareAbort"}
    assert len(items) == 1 + len([i for i in range(BULK) if i % 5 == 4])


def test_min_age_keeps_only_long_open_transactions(client: TestClient) -> None:
    items = ok(client, URL, limit=1000, min_age_seconds=100)["items"]
    assert "orders-app-0_0" in ids(items)
    assert "payments/tx-1" not in ids(items)  # 45 s
    assert "done-1" not in ids(items)  # old but committed
    assert all(i["state"] in OPEN and i["age_seconds"] >= 100 for i in items)


def test_id_prefix_is_exact_and_case_sensitive(client: TestClient) -> None:
    assert sorted(ids(ok(client, URL, id_prefix="orders-app")["items"])) == ["orders-app-0_0", "orders-app-0_1"]
    assert ok(client, URL, id_prefix="ORDERS")["items"] == []
    assert ok(client, URL, id_prefix="orders_app")["items"] == [], "'_' is not a wildcard"
    assert ok(client, URL, id_prefix="%")["items"] == []
    assert ids(ok(client, URL, id_prefix="payments/")["items"]) == ["payments/tx-1"]


def test_topic_filter_respects_dashes_in_topic_names(client: TestClient, scenario: Scenario) -> None:
    assert ids(ok(client, URL, topic="payments")["items"]) == ["payments-eu-writer"]
    assert ids(ok(client, URL, topic="payments-eu")["items"]) == ["payments/tx-1"]
    orders = ids(ok(client, URL, topic="orders", limit=1000)["items"])
    assert sorted(orders) == sorted(["orders-app-0_0", "orders-app-0_1"] + scenario.transactions[STAGING])
    assert ok(client, URL, topic="order")["items"] == []
    assert len(ok(client, URL, topic="bulk-1", limit=1000)["items"]) == len([i for i in range(BULK) if i % 4 == 1])


def test_hanging_filter_joins_open_episodes(client: TestClient, scenario: Scenario) -> None:
    hanging = ok(client, URL, hanging="true")["items"]
    assert ids(hanging) == ["orders-app-0_0"] and hanging[0]["hanging"] is True
    others = ok(client, URL, hanging="false", limit=1000)["items"]
    assert len(others) == len(scenario.transactions[PROD]) + len(scenario.transactions[STAGING]) - 1
    assert not any(i["hanging"] for i in others)


def test_cluster_filter_and_gone_transactions(client: TestClient, scenario: Scenario) -> None:
    assert sorted(ids(ok(client, URL, cluster=STAGING)["items"])) == scenario.transactions[STAGING]
    gone = [i for i in ok(client, URL, include_gone="true", limit=1000)["items"] if i["gone_at"]]
    assert ids(gone) == scenario.gone


def test_unknown_cluster_filter_is_404(client: TestClient) -> None:
    response = client.get(URL, params={"cluster": "nope"})
    assert response.status_code == 404
    assert "nope" in response.json()["detail"] and PROD in response.json()["detail"]


@pytest.mark.parametrize(("name", "value"), [("limit", 0), ("limit", 1001), ("limit", "ten"), ("sort", "size"),
                                        ("order", "up"), ("state", "Running"), ("min_age_seconds", -1),
                                        ("min_age_seconds", "1e300"), ("topic", "bad topic"),
                                        ("hanging", "maybe"), ("id_prefix", ""), ("cursor", "not-a-cursor"),
                                        ("cursor", "")])
def test_invalid_parameters_are_422_naming_the_parameter(client: TestClient, name: str, value: object) -> None:
    invalid_param(client, URL, name, **{name: value})


def test_cursor_from_another_sort_or_tampered_is_422(client: TestClient) -> None:
    cursor = ok(client, URL, limit=5, sort="state")["next_cursor"]
    assert cursor
    assert "cursor" in invalid_param(client, URL, "cursor", sort="transactional_id", cursor=cursor)
    invalid_param(client, URL, "cursor", sort="state", order="desc", cursor=cursor)
    for sort, payload in [("state", ["txn:state:asc", ["Ongoing"]]), ("state", ["txn:state:asc", [1, 2]]),
                          ("age", ["txn:age:desc", ["yesterday", 1]]),
                          ("age", ["txn:age:desc", ["2026-01-01T00:00:00", 1]]),
                          ("state", ["txn:state:asc", ["x", 2**70]]), ("state", {"a": 1})]:
        forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
        invalid_param(client, URL, "cursor", sort=sort, cursor=forged)


def test_one_transaction_with_timeline_partitions_and_hanging_episodes(client: TestClient) -> None:
    detail = ok(client, f"{URL}/{PROD}/orders-app-0_0")
    assert detail["state"] == "Ongoing" and detail["producer_epoch"] == 3 and detail["hanging"] is True
    states = [(t["from_state"], t["to_state"]) for t in detail["timeline"]]
    assert states == [("CompleteAbort", "Ongoing"), ("PrepareAbort", "CompleteAbort"), ("Ongoing", "PrepareAbort"),
                      ("Empty", "Ongoing"), (None, "Empty")]
    assert detail["timeline"][2]["events"] == ["timeout_abort"]
    assert {t["source"] for t in detail["timeline"]} == {"poll"}  # the factory's rows are polled ones
    assert detail["timeline_truncated"] is False
    offsets = {(p["topic"], p["partition"]): p for p in detail["partition_offsets"]}
    assert offsets[("orders", 0)]["high_watermark"] == 1920
    assert offsets[("orders", 0)]["last_stable_offset"] == 420
    assert offsets[("orders", 0)]["hwm_minus_lso"] == 1500
    assert [e["reason"] for e in detail["hanging_episodes"]] == ["partition_not_listed"]


def test_timeline_limit_truncates_newest_first(client: TestClient) -> None:
    detail = ok(client, f"{URL}/{PROD}/orders-app-0_0", timeline_limit=2)
    assert [t["to_state"] for t in detail["timeline"]] == ["Ongoing", "CompleteAbort"]
    assert detail["timeline_truncated"] is True
    invalid_param(client, f"{URL}/{PROD}/orders-app-0_0", "timeline_limit", timeline_limit=0)


def test_transactional_ids_with_slashes_and_expired_ids(client: TestClient) -> None:
    detail = ok(client, f"{URL}/{PROD}/payments/tx-1")
    assert detail["transactional_id"] == "payments/tx-1" and detail["state"] == "PrepareCommit"
    assert detail["partition_offsets"][0]["topic"] == "payments-eu"
    assert ok(client, f"{URL}/{PROD}/expired-1")["gone_at"] is not None


@pytest.mark.parametrize("path", [f"{PROD}/no-such-id", f"{STAGING}/orders-app-0_0", f"{PROD}/payments",
                                  f"{PROD}/a%00b", "nowhere/orders-app-0_0"])
def test_unknown_ids_and_clusters_are_404(client: TestClient, path: str) -> None:
    response = client.get(f"{URL}/{path}")
    assert response.status_code == 404, response.text
    assert "unknown" in response.json()["detail"]


def test_names_sort_bytewise_on_both_backends(db_url: str) -> None:
    """PostgreSQL databases often use a locale collation; ids must still page in one, stable byte order."""
    names = ["a_1", "B-1", "a.1", "a-1", "a1", "A-2", "b", "é-1"]
    migrate(db_url)
    engine = make_engine(db_url)
    with Session(engine) as session:
        f = Factory(session, datetime.now(timezone.utc))
        prod = f.cluster(PROD)
        for i, name in enumerate(names):
            f.txn(prod, name, producer_id=i)
        session.commit()
    engine.dispose()
    runtime = build_runtime(make_settings(db_url), collect=False)
    try:
        with make_client(runtime) as client:
            walked = flat(walk(client, URL, sort="transactional_id", limit=3))
    finally:
        runtime.engine.dispose()
    assert ids(walked) == sorted(names, key=lambda n: n.encode())
