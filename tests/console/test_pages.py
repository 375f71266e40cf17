"""Console pages rendered server-side (no browser): content, links, the read token, nothing from outside."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from html import unescape
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.console.scenario import FROZEN, PAGES, console_client
from txnwatch.core.config import ApiConfig, ConsoleConfig


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with console_client(tmp_path_factory.mktemp("console"),
                        console=ConsoleConfig(grafana_url="https://grafana.example.com/")) as c:
        yield c


def _option(html: str) -> dict[str, Any]:
    match = re.search(r'data-chart="([^"]+)"', html)
    assert match is not None, "no chart on the page"
    return json.loads(match.group(1).replace("&#34;", '"').replace("&quot;", '"'))


def _external(html: str) -> list[str]:
    """URLs a browser would load (src/href of scripts, styles, images, icons) that leave the daemon."""
    loaded = re.findall(r'<(?:script|img|link)\b[^>]*?(?:src|href)="([^"]+)"', html)
    return [u for u in loaded if re.match(r"^(https?:)?//", u)]


@pytest.mark.parametrize("name", list(PAGES))
def test_pages_load_only_from_the_daemon(client: TestClient, name: str) -> None:
    response = client.get(PAGES[name])
    assert response.status_code == 200, response.text
    assert _external(response.text) == []
    assert '<script src="/console/static/vendor/echarts.min.js">' in response.text


def test_now_page_names_what_hangs_with_the_abort_command_and_who_is_blocked(client: TestClient) -> None:
    html = client.get("/console").text
    api = {h["topic"] + str(h["partition"]): h for h in client.get("/api/v1/hanging").json()["items"]}
    assert html.count('data-testid="hanging"') == len(api) == 2
    for h in api.values():
        assert h["abort_command"] in html.replace("&#39;", "'")
    assert "Coordinator does not list this partition" in html  # the vocabulary's title of partition_not_listed
    assert "orders-consumer" in html and "records are invisible" in html
    assert 'href="/console/runbooks#kafkahangingtransaction"' in html
    from txnwatch.serve.console.router import PANELS

    panel = PANELS["txnwatch-partitions"]["Hanging transactions"]
    assert (f'href="https://grafana.example.com/d/txnwatch-partitions?var-cluster=prod&amp;var-topic=orders&amp;'
            f'viewPanel={panel}"') in html
    assert "unreachable" in html and "NoBrokersAvailable" in html  # the staging cluster is down


def test_transaction_page_charts_states_epochs_and_marks(client: TestClient) -> None:
    html = client.get(PAGES["transaction"]).text
    option = _option(html)
    states = option["series"][0]
    assert [p[1] for p in states["data"]] == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort", "Ongoing", "Ongoing"]
    assert [m["name"] for m in states["markLine"]["data"]] == ["coordinator timeout abort"]
    assert option["series"][1]["data"][0][1] == 2 and option["series"][1]["data"][-1][1] == 3  # the epoch bump


def test_partition_page_marks_the_stall_and_its_blocking_producer(client: TestClient) -> None:
    html = client.get(PAGES["partition"]).text
    option = _option(html)
    areas = option["series"][1]["markArea"]["data"]
    assert [a[0]["name"] for a in areas] == ["LSO stall: producer 2001 (orders-app-0_0)"]
    assert [len(s["data"]) for s in option["series"]] == [2, 2]  # two polls sampled the partition


def test_unknown_things_are_404(client: TestClient) -> None:
    assert client.get("/console/transactions/prod/nope").status_code == 404
    assert client.get("/console/partitions/nowhere/orders/0").status_code == 404
    assert client.get("/console/partitions/prod/orders/x").status_code == 422


def test_runbooks_page_has_every_alert_anchor(client: TestClient) -> None:
    from txnwatch.core.vocabulary import ALERTS

    html = client.get("/console/runbooks").text
    for alert in ALERTS:
        assert f'id="{alert.anchor}"' in html


def test_runbooks_are_rendered_markdown_not_literal(client: TestClient) -> None:
    """Issue 27 item 7: the page showed `[metrics.md](metrics.md)` and `---` as typed."""
    html = client.get("/console/runbooks").text
    assert "[metrics.md](metrics.md)" not in html and "<p>---</p>" not in html and "<hr" in html
    assert '<a href="https://github.com/txnwatch/txnwatch/blob/main/docs/metrics.md">metrics.md</a>' in html
    assert '<a href="#kafkahangingtransaction">KafkaHangingTransaction</a>' in html  # anchors stay on the page
    assert "<table>" in html and "**" not in html  # tables and bold, rendered
    body = html[html.index('id="kafkahangingtransaction"'):]
    assert "<pre><code" in body and "# or with Kafka's own tool:" in unescape(body), \
        "a # inside a code block is code, not a heading"


def test_the_read_token_guards_the_console_and_a_login_sets_a_cookie(tmp_path: Path) -> None:
    with console_client(tmp_path, api=ApiConfig(read_token="s3cret")) as c:
        first = c.get("/console/partitions/prod/orders/0", follow_redirects=False, headers={"Accept": "text/html"})
        assert (first.status_code, first.headers["location"]) == (303, "/console/login?next=/console/partitions/prod/orders/0")
        assert c.get("/console/login").status_code == 200 and c.get("/console/static/console.css").status_code == 200
        assert c.get("/api/v1/hanging").status_code == 401
        assert c.get("/console", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        wrong = c.post("/console/login", content="token=nope", follow_redirects=False,
                       headers={"content-type": "application/x-www-form-urlencoded"})
        assert wrong.headers["location"] == "/console/login?error=true&next=/console"
        ok = c.post("/console/login", content="token=s3cret&next=//evil.example/", follow_redirects=False,
                    headers={"content-type": "application/x-www-form-urlencoded"})
        assert ok.status_code == 303 and "httponly" in ok.headers["set-cookie"].lower()
        assert ok.headers["location"] == "/console"  # never off-site
        assert c.get("/console").status_code == 200  # the cookie now rides along, to the API too
        assert c.get("/api/v1/hanging").status_code == 200
        assert "samesite=strict" in ok.headers["set-cookie"].lower()


def test_docs_pages_point_at_vendored_assets(client: TestClient) -> None:
    for path in ("/docs", "/redoc"):
        html = client.get(path).text
        assert _external(html) == [], path
        for src in re.findall(r'(?:src|href)="(/console/static/[^"]+)"', html):
            assert client.get(src).status_code == 200, src
    assert "fonts.googleapis" not in client.get("/redoc").text


def test_make_run_prints_the_console_url_first() -> None:
    from txnwatch.cli.demo import banner

    lines = [line for line in banner(8080, "127.0.0.1:9092", Path("lab"), "demo-in").splitlines() if line.strip()]
    assert "http://127.0.0.1:8080/console" in lines[0]


def test_grafana_links_name_panels_that_exist() -> None:
    from txnwatch.serve.console.router import HERE, PANELS

    used = re.findall(r'grafana_link\(grafana, "([^"]+)"(?:, "([^"]+)")?', "".join(
        p.read_text() for p in (HERE / "templates").glob("*.html")))
    assert used
    for uid, title in used:
        assert uid in PANELS and (not title or title in PANELS[uid]), (uid, title)


HTML = {"Accept": "text/html,application/xhtml+xml"}


@pytest.mark.parametrize(("path", "status", "words"), [
    pytest.param("/console/transactions/prod/nope", 404, "transactional id 'nope' is unknown", id="unknown-id"),
    pytest.param("/console/partitions/prod/orders/99", 404, "no offsets are recorded for partition orders-99",
                 id="unknown-partition"),
    pytest.param("/console/partitions/nowhere/orders/0", 404, "unknown cluster", id="unknown-cluster"),
    pytest.param("/console/partitions/prod/orders/x", 422, "partition", id="not-a-number"),
    pytest.param("/console/no-such-page", 404, "Not Found", id="no-such-page"),
])
def test_a_browser_gets_a_page_with_a_way_back(client: TestClient, path: str, status: int, words: str) -> None:
    """Issue 27 item 7: unknown ids and partitions answered raw JSON, or an empty 200, in the browser."""
    response = client.get(path, headers=HTML)
    assert response.status_code == status and response.headers["content-type"].startswith("text/html")
    assert words in unescape(response.text) and '<a href="/console">Back to Now</a>' in response.text
    if "/prod/" in path:
        assert 'href="/console#cluster-prod"' in response.text
    scripted = client.get(path)  # a script keeps the API's one JSON shape
    assert scripted.status_code == status and "detail" in scripted.json()


def test_the_api_answers_json_even_to_a_browser(client: TestClient) -> None:
    response = client.get("/api/v1/transactions/prod/nope", headers=HTML)
    assert response.status_code == 404 and response.json()["detail"]


def test_partition_chart_fits_its_data_and_prints_no_label_over_it(client: TestClient) -> None:
    """Issue 27 item 4: the axis spanned the whole hour with minutes of data in its right 3 %, and stall
    and pin labels were printed over each other and over the line."""
    from datetime import timedelta

    from tests.console.scenario import FROZEN
    from txnwatch.core.epoch import to_ms as ms
    from txnwatch.serve.console.charts import fitted_window

    option = _option(client.get(PAGES["partition"]).text)  # ?hours=2; the scenario's data starts later
    lso = option["series"][1]
    starts = [p[0] for s in option["series"] for p in s["data"]] + [a[0]["xAxis"] for a in lso["markArea"]["data"]]
    starts += [pin["coord"][0] for pin in lso["markPoint"]["data"]]
    span = option["xAxis"]["max"] - option["xAxis"]["min"]
    assert option["xAxis"]["max"] == ms(FROZEN) and span < ms(FROZEN) - ms(FROZEN - timedelta(hours=2))
    assert option["xAxis"]["min"] <= min(starts) and (min(starts) - option["xAxis"]["min"]) <= span / 10 + 30_000
    assert lso["markArea"]["label"] == {"show": False} and lso["markPoint"]["label"] == {"show": False}
    assert lso["labelLayout"] == {"hideOverlap": True}
    empty = (FROZEN - timedelta(hours=1), FROZEN)
    assert fitted_window(empty, []) == empty, "no data: the whole chosen window"
    assert fitted_window(empty, [FROZEN - timedelta(days=2)]) == empty, "never wider than the choice"
    three_minutes = fitted_window(empty, [FROZEN - timedelta(minutes=3)])
    assert three_minutes == (FROZEN - timedelta(minutes=3, seconds=30), FROZEN)


def test_episode_table_names_the_blocker_in_words(client: TestClient) -> None:
    html = client.get(PAGES["partition"]).text
    cell = re.search(r'data-testid="blocker">(.*?)</td>', html, re.S)
    assert cell is not None
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", cell.group(1))).strip()
    assert text == "producer 2001, epoch 3, transactional id orders-app-0_0"


def test_a_hanging_ids_page_says_the_coordinator_does_not_know_it(client: TestClient) -> None:
    html = client.get(PAGES["transaction"]).text
    notice = re.search(r'data-testid="coordinator-unaware">(.*?)</p>', html, re.S)
    assert notice is not None and "The coordinator does not know this transaction" in notice.group(1)
    assert "orders-0" in notice.group(1)


def test_now_page_shows_the_brokers_transaction_signals_beside_txnwatchs(client: TestClient) -> None:
    from txnwatch.core.model import BrokerTxnSignals, BrokerVerification, ClusterSnapshot

    runtime = client.app.state.runtime  # type: ignore[attr-defined]  # Starlette's app is typed as ASGIApp
    before = runtime.state.get("prod")
    assert 'data-testid="broker-signals"' not in client.get("/console").text  # no exporter configured: no table
    figures = (BrokerVerification("1", "u", verifications=3, signals=BrokerTxnSignals(
                   late_transaction_partitions=2, lso_lag=(("orders", 0, 1500), ("orders", 1, 0)),
                   marker_unknown_destination_queue=4, marker_log_append_retry_queue=0, coordinator_load_ms_max=89.0)),
               BrokerVerification("2", "u", error="no AddPartitionsToTxnManager ...", signals=BrokerTxnSignals(
                   lso_lag=(("orders", 2, 0),))),
               BrokerVerification("3", "u", error="ConnectError"))
    runtime.state.update("prod", snapshot=ClusterSnapshot(cluster="prod", taken_at_ms=1, duration_ms=1,
                                                          broker_verification=figures))
    try:
        html = client.get("/console").text
    finally:
        if before is not None:
            runtime.state.publish(before)
    table = html[html.index('data-testid="broker-signals"'):html.index("</table>", html.index('data-testid="broker-signals"'))]
    rows = [re.sub(r"<[^>]+>", " ", r).split() for r in table.split("<tr>")[2:]]
    assert rows[0] == ["1", "2", "1,500", "(orders-0)", "4", "0", "89", "ms"]
    assert rows[1] == ["2", "not", "reported", "0", "not", "reported", "not", "reported", "not", "reported"]
    assert len(rows) == 2  # broker 3's exporter did not answer: nothing to show beside txnwatch's figures
    assert "txnwatch: 2 hanging" in html


def test_the_partition_page_prints_the_incidents_since_as_the_now_card_and_the_alert_do(client: TestClient) -> None:
    def since(html: str, after: str) -> str:
        match = re.search(re.escape(after) + r'.*?data-testid="since">since ([^(<]+?) \(', html, re.S)
        assert match is not None, f"no since after {after!r}"
        return match.group(1)

    now_html = client.get("/console").text
    on_card = since(now_html, 'href="/console/partitions/prod/orders/0"')
    on_page = since(client.get(PAGES["partition"]).text, 'data-testid="hanging"')
    # The seed (tests/api/factory.py): orders-0's hanging transaction was first seen 100 s before FROZEN and
    # last wrote 900 s before that, the earliest moment anything knows of it; its stall started 90 s before FROZEN.
    first_known = FROZEN - timedelta(seconds=100 + 900)
    assert on_page == on_card == first_known.strftime("%Y-%m-%d %H:%M:%S UTC"), (on_page, on_card)


@pytest.fixture(scope="module")
def with_open_stall(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    """The scenario plus a stall on orders-5 held by ``payments-7``, a transaction its coordinator holds open."""
    from sqlalchemy.orm import Session

    from tests.api.factory import Factory
    from txnwatch.store import models as m

    with console_client(tmp_path_factory.mktemp("console-by-id")) as c:
        runtime = c.app.state.runtime  # type: ignore[attr-defined]  # Starlette's app is typed as ASGIApp
        with Session(runtime.engine) as session:
            prod = session.query(m.Cluster).filter_by(name="prod").one()
            Factory(session, FROZEN).stall(prod, "orders", 5, started_ago=60, transactional_id="payments-7")
            session.commit()
        yield c


@pytest.mark.parametrize(("release", "offered"), [
    pytest.param((4, 1), True, id="4.1: the abort by transactional id"),
    pytest.param((4, 0), False, id="4.0: the partition abort only"),
])
def test_a_stall_and_an_ongoing_id_offer_the_abort_by_id_where_the_cluster_takes_it(
        with_open_stall: TestClient, release: tuple[int, int], offered: bool) -> None:
    """A stall whose blocking transaction its coordinator holds open (not hanging): on 4.1+ the Now card, the API
    and the id's page hand out ``txnwatch abort --transactional-id``; a hanging one keeps the partition abort."""
    from txnwatch.core.model import BrokerRelease, ClusterSnapshot

    client = with_open_stall
    runtime = client.app.state.runtime  # type: ignore[attr-defined]  # Starlette's app is typed as ASGIApp
    runtime.state.update("prod", snapshot=ClusterSnapshot(
        cluster="prod", taken_at_ms=1, duration_ms=1,
        broker_releases=(BrokerRelease(1, (4, 2), transaction_version=2), BrokerRelease(2, release))))
    stalls = {s["partition"]: s for s in client.get("/api/v1/lso-stalls").json()["items"] if s["ended_at"] is None}
    html = unescape(client.get("/console").text)
    page = unescape(client.get(PAGES["transaction"]).text)
    assert stalls[0]["hanging_reason"] is not None and stalls[0]["abort_by_id_command"] is None, "hanging: by partition"
    command = stalls[5]["abort_by_id_command"]
    assert (command is not None) is offered
    if offered:
        assert command == "txnwatch abort --bootstrap-server kafka-0.prod:9092,kafka-1.prod:9092 --transactional-id payments-7 --execute"
        assert command in html
    assert ('data-testid="abort-by-id-command"' in html) is offered
    assert "<strong>Ongoing</strong>" in page and ("--transactional-id orders-app-0_0" in page) is offered


def test_the_now_page_names_a_clusters_known_hazards(with_open_stall: TestClient) -> None:
    from txnwatch.core.model import BrokerRelease, ClusterSnapshot

    client = with_open_stall
    runtime = client.app.state.runtime  # type: ignore[attr-defined]  # Starlette's app is typed as ASGIApp
    runtime.state.update("prod", snapshot=ClusterSnapshot(cluster="prod", taken_at_ms=1, duration_ms=1,
                                                          broker_releases=(BrokerRelease(1, (4, 3), False, 2),)))
    html = unescape(client.get("/console").text)
    assert 'data-testid="known-hazards"' in html and "KAFKA-20090" in html and "KAFKA-20310" not in html
    runtime.state.update("prod", snapshot=ClusterSnapshot(cluster="prod", taken_at_ms=1, duration_ms=1,
                                                          broker_releases=(BrokerRelease(1, (4, 4), True, 2),)))
    assert 'data-testid="known-hazards"' not in client.get("/console").text


def test_cards_and_the_ids_page_name_the_application_behind_the_id(client: TestClient) -> None:
    """orders-app-0_0 is a Kafka Streams exactly_once task id: its card (hanging, and the stall it causes, are one)
    and the id's page say so; the other hanging transaction has no transactional id, so no such line."""
    html = unescape(client.get("/console").text)
    assert html.count('data-testid="framework"') == 1
    assert "Kafka Streams <code>orders-app</code> (exactly_once), task 0_0" in html
    page = unescape(client.get(PAGES["transaction"]).text)
    assert "Kafka Streams <code>orders-app</code> (exactly_once), task 0_0" in page


@pytest.mark.parametrize(("release", "offered"), [
    pytest.param((4, 1), True, id="4.1: each with its abort by transactional id"),
    pytest.param((4, 0), False, id="4.0: the partition abort named instead"),
])
def test_the_now_page_lists_lingering_flink_transactions(with_open_stall: TestClient, release: tuple[int, int],
                                                         offered: bool) -> None:
    from dataclasses import replace

    from tests.unit.detect.builders import TP, snapshot, txn
    from txnwatch.core.model import BrokerRelease, TxnState
    from txnwatch.detect import INITIAL, evaluate

    client = with_open_stall
    runtime = client.app.state.runtime  # type: ignore[attr-defined]  # Starlette's app is typed as ASGIApp
    at = 10_000_000
    polled = replace(snapshot(at=at, txns=(
        txn("orders-sink-3-1204", pid=42, partitions=(TP,), start=at - 90_000, timeout=3_600_000),
        txn("orders-sink-3-1205", pid=43, state=TxnState.COMPLETE_COMMIT, partitions=(), start=at - 60_000))),
        cluster="prod", broker_releases=(BrokerRelease(1, release, False, 2),))
    _, findings = evaluate(INITIAL, polled, at)
    runtime.state.update("prod", snapshot=polled, findings=findings)
    try:
        html = unescape(client.get("/console").text)
    finally:
        runtime.state.update("prod", snapshot=None, findings=None)
    assert html.count('data-testid="lingering"') == 1
    assert "superseded by checkpoint 1,205" in html and "orders-sink-3-1204" in html
    by_id = "--transactional-id orders-sink-3-1204 --execute"
    assert (by_id in html) is offered
    assert ("older than Kafka 4.1" in html) is not offered
