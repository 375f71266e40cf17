"""The console's consumer group pages (no browser): offset lag from the stored sample beside the record lag of the
latest poll, and why the two differ."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api.factory import PROD
from tests.console.scenario import console_client
from txnwatch.core.findings import Findings, GroupLag
from txnwatch.core.model import TopicPartition
from txnwatch.core.views import ClusterView


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with console_client(tmp_path_factory.mktemp("console-groups")) as c:
        yield c


def _publish(client: TestClient, counted: dict[int, int]) -> None:
    """The latest poll counted orders-consumer's partitions (committed offsets as the scenario's latest sample)."""
    committed = {0: 400, 1: 990, 2: 800, 3: 400}
    lags = tuple(GroupLag(PROD, "orders-consumer", TopicPartition("orders", p), committed[p], None, None, None,
                          lag_records=n) for p, n in counted.items())
    client.app.state.runtime.state.publish(ClusterView(name=PROD, up=True, findings=Findings(PROD, 0, lags=lags)))  # type: ignore[attr-defined]  # the app's runtime, as the console reads it


def _option(html: str) -> dict[str, Any]:
    match = re.search(r'data-chart="([^"]+)"', html)
    assert match is not None, "no chart on the page"
    return json.loads(unescape(match.group(1)))


def _cells(html: str, row: str, testid: str) -> list[str]:
    """The text of each ``testid`` cell in the rows whose opening tag contains ``row``."""
    out = []
    for match in re.finditer(r"<tr[^>]*" + re.escape(row) + r"[^>]*>(.*?)</tr>", html, re.S):
        found = re.search(rf'data-testid="{testid}">(.*?)</td>', match.group(1), re.S)
        if found:
            out.append(unescape(found.group(1)).strip())
    return out


def test_groups_list_shows_record_lag_beside_offset_lag(client: TestClient) -> None:
    _publish(client, {0: 7, 1: 0, 2: 0, 3: 9})
    html = client.get("/console/groups").text
    row = 'data-group="orders-consumer"'
    # The scenario's latest sample: lag vs LSO 20+0+0+20, vs HWM 1520+10+0+200.
    assert (_cells(html, row, "lag-lso"), _cells(html, row, "lag-hwm")) == (["40"], ["1,730"])
    assert _cells(html, row, "lag-records") == ["16"]
    assert _cells(html, 'data-group="audit/readers"', "lag-records") == ["not counted yet"]
    assert 'data-testid="lag-explained"' in html and "marker" in html and "aborted" in html
    assert 'href="/console/groups/prod/orders-consumer"' in html


def test_a_group_missing_a_counted_partition_shows_no_total(client: TestClient) -> None:
    _publish(client, {0: 7, 1: 0, 2: 0})
    html = client.get("/console/groups").text
    assert _cells(html, 'data-group="orders-consumer"', "lag-records") == ["not counted yet"]
    page = client.get("/console/groups/prod/orders-consumer").text
    assert _cells(page, 'data-partition="orders-3"', "lag-records") == ["not counted yet"]
    assert re.search(r'<dd data-testid="lag-records">not counted yet</dd>', page)


def test_group_page_lists_each_partitions_lags(client: TestClient) -> None:
    _publish(client, {0: 7, 1: 0, 2: 0, 3: 9})
    html = client.get("/console/groups/prod/orders-consumer").text
    assert [_cells(html, f'data-partition="orders-{p}"', "lag-records")[0] for p in range(4)] == ["7", "0", "0", "9"]
    assert [_cells(html, f'data-partition="orders-{p}"', "lag-lso")[0] for p in range(4)] == ["20", "0", "0", "20"]
    assert '<dd data-testid="lag-records">16</dd>' in html
    assert '<dd data-testid="lag-lso">40</dd>' in html
    assert 'href="/console/partitions/prod/orders/0"' in html


def test_a_group_id_with_a_slash_has_its_page(client: TestClient) -> None:
    assert client.get("/console/groups/prod/audit/readers").status_code == 200


@pytest.mark.parametrize(("path", "words"), [
    pytest.param("/console/groups/prod/nobody", "consumer group 'nobody' has no committed offsets", id="unknown-group"),
    pytest.param("/console/groups/nope/orders-consumer", "unknown cluster 'nope'", id="unknown-cluster"),
])
def test_unknown_group_is_a_404_page_with_a_way_back(client: TestClient, path: str, words: str) -> None:
    response = client.get(path, headers={"Accept": "text/html"})
    assert response.status_code == 404
    assert words in unescape(response.text) and 'data-testid="way-back"' in response.text


def test_the_header_links_the_groups_list(client: TestClient) -> None:
    assert '<a href="/console/groups">Groups</a>' in client.get("/console").text


def _store(client: TestClient, group: str, samples: list[tuple[float, list[tuple[int, int, int, int | None]]]]) -> None:
    """Lag samples of ``group`` on prod's orders: (seconds before the frozen time, [(partition, lag vs HWM, lag vs
    LSO, records)])."""
    from sqlalchemy.orm import Session

    from tests.console.scenario import FROZEN
    from txnwatch.store import models as m
    from txnwatch.store import queries

    with Session(client.app.state.runtime.engine) as session:  # type: ignore[attr-defined]  # the app's runtime
        cid = queries.cluster_ids(session, [PROD])[PROD]
        for seconds, rows in samples:
            session.add_all(m.ConsumerLagSample(
                cluster_id=cid, group_id=group, topic="orders", partition=p, sampled_at=FROZEN - timedelta(seconds=s),
                committed_offset=100, lag_hwm=hwm, lag_lso=lso, lag_records=n)
                for s in (seconds,) for p, hwm, lso, n in rows)
        session.commit()


def test_stored_record_lag_is_listed_and_charted_in_the_groups_history(client: TestClient) -> None:
    # 5 s before the frozen time is the scenario's latest lag sample of prod: the list shows that one.
    _store(client, "stored-group", [(600, [(0, 30, 30, 12), (1, 8, 8, None)]),
                                    (5, [(0, 20, 20, 9), (1, 6, 6, 3)])])
    html = client.get("/console/groups").text
    assert _cells(html, 'data-group="stored-group"', "lag-records") == ["12"]
    assert _cells(html, 'data-group="stored-group"', "lag-lso") == ["26"]
    page = client.get("/console/groups/prod/stored-group").text
    assert '<dd data-testid="lag-records">12</dd>' in page
    option = _option(page)
    series = {s["name"]: [v for _, v in s["data"]] for s in option["series"]}
    assert series == {"offset lag vs HWM": [38, 26], "offset lag vs LSO": [38, 26],
                      "records (read_committed)": [None, 12]}, "a sample with an uncounted partition has no total"
