"""One pinned partition as on-call meets it (issue 27): one incident, one card, one clock, honest badges.

Item 1: a read_uncommitted group committed at 1,284 on a partition whose LSO is pinned at 30 was
marked "stuck at the LSO" (``committed >= lso``); it reads past the open transaction and is not held
up at all.  Items 2 and 3: the hanging transaction, the LSO stall it causes and the alert that pages
for both were two cards and a table row, each with its own "since"; the alert kept its LSO title
and showed "+1 related: hanging_transaction".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.conftest import make_client, make_settings
from tests.api.factory import PROD, Factory, ago
from tests.fixtures.migrated import migrate
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.console import router
from txnwatch.store import models as m
from txnwatch.store.db import make_engine

NOW = datetime(2026, 11, 23, 3, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('position')) / 'txnwatch.db'}"
    migrate(url)
    engine = make_engine(url)
    with Session(engine) as session:
        f = Factory(session, NOW)
        prod = f.cluster(PROD)
        f.hanging(prod, "orders", 0, transactional_id=None, producer_id=7777, first_seen_ago=60)
        f.stall(prod, "orders", 0, started_ago=960)  # pinned since the transaction's last write (factory: 960 s)
        # The stall paged first and keeps its key; the hanging transaction is its root cause (alerting/grouping).
        f.add(m.Alert(cluster_id=prod.id, rule="lso_stall", incident_key="lso_stall/prod/orders-0", state="firing",
                      severity="critical", summary="[prod] hanging transaction on orders-0 (producer 7777 epoch 3, "
                      "transactional id unknown to its coordinator) (+1 related: LSO stalled)",
                      labels={"rule": "lso_stall", "cluster": "prod", "topic": "orders", "partition": "0"},
                      details={"incident_group": "prod/pid=7777", "root_cause": "hanging_transaction",
                               "since": ago(NOW, 960).isoformat(), "related": []},
                      started_at=ago(NOW, 95), fired_at=ago(NOW, 85), resolved_at=None, last_seen_at=ago(NOW, 5)))
        other = f.alert(prod, "transaction_timeout_exceeded", "pending", started_ago=30)  # no partition: no card
        other.summary = "[prod] transaction payments-1 open for 5 min, past its transaction.timeout.ms of 60 s"
        f.offsets(prod, 5, [("orders", 0, 1290, 30, 0, 1)])
        f.lag(prod, 5, "audit-raw", [("orders", 0, 1284, 6, 0, None)])  # read_uncommitted, far past the LSO
        f.lag(prod, 5, "billing", [("orders", 0, 30, 1260, 0, 90.0)])  # read_committed, held at the LSO
        f.lag(prod, 5, "late", [("orders", 0, 10, 1280, 20, 200.0)])  # still 20 readable records before it
        session.commit()
    engine.dispose()
    runtime = build_runtime(make_settings(url), collect=False)
    original = router.now
    router.now = lambda: NOW  # the console's clock, frozen as the seeded rows are
    try:
        with make_client(runtime) as c:
            yield c
    finally:
        router.now = original
        runtime.engine.dispose()


@pytest.mark.parametrize("path", ["/api/v1/hanging", "/api/v1/lso-stalls"])
def test_a_group_past_the_lso_is_read_uncommitted_and_not_waiting(client: TestClient, path: str) -> None:
    (item,) = client.get(path).json()["items"]
    groups = {g["group_id"]: (g["position"], g["isolation_level"], g["waiting_at_lso"]) for g in item["blocked_groups"]}
    assert groups == {"audit-raw": ("past_lso", "read_uncommitted", False),
                      "billing": ("at_lso", None, True),
                      "late": ("before_lso", None, False)}


def test_console_badges_only_the_group_held_at_the_lso(client: TestClient) -> None:
    html = client.get("/console").text
    card = html[html.index('data-testid="hanging"'):]
    card = card[:card.index("</div>")]  # the incident's card (its blocks hold no div)
    assert card.count("stuck at the LSO") == 1
    stuck = card.index("stuck at the LSO")
    assert card.rindex("billing", 0, stuck) > card.rfind("audit-raw", 0, stuck)
    assert "read_uncommitted, not blocked" in card and "(20 readable records left)" in card


def _visible(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_one_incident_is_one_card_titled_by_its_root_cause_with_one_clock(client: TestClient) -> None:
    html = client.get("/console").text
    assert html.count('data-testid="hanging"') == 1 and html.count('data-testid="stall"') == 0
    card = html[html.index('data-testid="hanging"'):]
    card = card[:card.index("</div>")]
    assert html.count('data-testid="abort-command"') == 1, "the abort command is printed once"
    text = _visible(card)
    assert "Hanging transaction on orders-0" in text and "firing" in text
    assert "since 2026-11-23 02:44:00 UTC (16 min ago)" in text, "the incident's clock: pinned 960 s ago"
    assert set(re.findall(r"since ([\d-]+ [\d:]+ UTC)", text)) == {"2026-11-23 02:44:00 UTC"}, "one clock"
    assert "LSO stalled: it stands at 420" in text  # the effect, on the cause's card
    others = _visible(html[html.index('data-testid="alerts"'):])
    assert "Transaction past its timeout" in others and "orders-0" not in others, "the paging alert is on the card"
    assert not re.search(r"\b(hanging_transaction|lso_stall|transaction_timeout_exceeded)\b", _visible(html))


def test_api_alert_names_its_root_cause_and_the_same_since_as_the_card(client: TestClient) -> None:
    items = {a["incident_key"]: a for a in client.get("/api/v1/alerts").json()["items"]}
    paging = items["lso_stall/prod/orders-0"]
    assert (paging["rule"], paging["root_cause"], paging["title"]) == ("lso_stall", "hanging_transaction",
                                                                       "Hanging transaction")
    assert paging["since"].startswith("2026-11-23T02:44:00")
    (other,) = [a for k, a in items.items() if k != "lso_stall/prod/orders-0"]
    assert other["root_cause"] == "transaction_timeout_exceeded" and other["since"] == other["started_at"]
