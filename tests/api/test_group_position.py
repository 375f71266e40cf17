"""Blocked groups are judged by their position against the LSO, which betrays their isolation level.

Issue 27 item 1: a read_uncommitted group committed at 1,284 on a partition whose LSO is pinned at
30 was marked "stuck at the LSO" (``committed >= lso``); it reads past the open transaction and is
not held up at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.conftest import make_client, make_settings
from tests.api.factory import PROD, Factory
from txnwatch.runtime.wiring import build_runtime
from txnwatch.store.db import make_engine
from txnwatch.store.migrate import upgrade

NOW = datetime(2026, 11, 23, 3, 0, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    url = f"sqlite:///{Path(tmp_path_factory.mktemp('position')) / 'txnwatch.db'}"
    upgrade(url)
    engine = make_engine(url)
    with Session(engine) as session:
        f = Factory(session, NOW)
        prod = f.cluster(PROD)
        f.hanging(prod, "orders", 0, transactional_id=None, producer_id=7777, first_seen_ago=60)
        f.stall(prod, "orders", 0, started_ago=120)
        f.offsets(prod, 5, [("orders", 0, 1290, 30, 0, 1)])
        f.lag(prod, 5, "audit-raw", [("orders", 0, 1284, 6, 0, None)])  # read_uncommitted, far past the LSO
        f.lag(prod, 5, "billing", [("orders", 0, 30, 1260, 0, 90.0)])  # read_committed, held at the LSO
        f.lag(prod, 5, "late", [("orders", 0, 10, 1280, 20, 200.0)])  # still 20 readable records before it
        session.commit()
    engine.dispose()
    runtime = build_runtime(make_settings(url), collect=False)
    with make_client(runtime) as c:
        yield c
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
