"""The console, /docs and /redoc in headless chromium against the daemon watching the lab.

One daemon (SQLite, 1 s polls) on the session's lab cluster, one browser: a hanging
transaction injected the pre-KIP-890 way (the lab fixture runs with partition verification
off), a read_committed group committed on its partition at the LSO and a read_uncommitted one
past it, and a transactional id fenced by a second producer instance.  Each page must load with no console error and no request leaving
127.0.0.1, and show what an on-call engineer needs.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock
from urllib.parse import quote

import pytest
from kafka import KafkaConsumer
from kafka.structs import OffsetAndMetadata, TopicPartition

from tests.console.browser import Browser
from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from txnwatch.core import commands
from txnwatch.lab import faults
from txnwatch.lab.topics import create_topic, delete_topics_quietly, unique_topic_name

pytestmark = [pytest.mark.lab, pytest.mark.browser, pytest.mark.slow]


@dataclass
class Scene:
    daemon: Daemon
    topic: str
    hanging: Any
    group: str
    reader: str  # read_uncommitted, committed past the LSO
    fenced_id: str


def _demo_program() -> str:
    """What `txnwatch demo` prints as the program when `make run` started it: make does not put the virtualenv on
    PATH, so the line names the script by its path. (Under `make test` the virtualenv is on PATH, and
    commands.program() would then rightly say `txnwatch`, which the bare-PATH shell below cannot find.)"""
    with mock.patch.dict(os.environ, {"PATH": "/usr/bin:/bin"}):
        return commands.program()


def _events(d: Daemon, txn_id: str) -> set[str]:
    r = d.get(f"/api/v1/transactions/lab/{quote(txn_id, safe='')}", params={"timeline_limit": 200})
    return {e for t in r.json()["timeline"] for e in t["events"]} if r.status_code == 200 else set()


@pytest.fixture(scope="module")
def scene(lab_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    bootstrap = lab_cluster.bootstrap_servers
    db = tmp_path_factory.mktemp("console") / "txnwatch.db"
    daemon = start_daemon(database_url=f"sqlite:///{db}", poll_interval_seconds=1,
                          console=dict(cli_command=_demo_program()),
                          lag_sample_interval_seconds=0,  # every poll's lag rows: the cards name the groups now
                          clusters=[dict(name="lab", bootstrap_servers=bootstrap, request_timeout_ms=4000)],
                          detection=dict(lso_stall_seconds=3))
    admin = lab_cluster.admin()
    topic = unique_topic_name("console")
    create_topic(admin, topic, 2, min(3, len(lab_cluster.brokers)))
    hanging = faults.inject_hanging_transaction(bootstrap, topic, 0, records=3)
    group, reader = f"rc-{topic}", f"ru-{topic}"
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                             enable_auto_commit=False)
    uncommitted = KafkaConsumer(bootstrap_servers=bootstrap, group_id=reader, isolation_level="read_uncommitted",
                                enable_auto_commit=False)
    zombie = successor = None
    try:
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(hanging.first_offset, "", -1)})
        # A read_uncommitted group reads the open transaction's records: it commits past the LSO.
        uncommitted.commit({TopicPartition(topic, 0): OffsetAndMetadata(hanging.first_offset + 3, "", -1)})
        fenced_id = faults.unique_transactional_id("console-fenced")
        zombie = faults.transactional_producer(bootstrap, fenced_id, 10_000)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=1).get(timeout=30)
        # Polling sees what lasts a poll: let the zombie's transaction be seen open, then fence it.
        wait_for(lambda: (r := daemon.get(f"/api/v1/transactions/lab/{fenced_id}")).status_code == 200
                 and r.json()["state"] == "Ongoing", 30, what="the zombie's open transaction")
        successor = faults.transactional_producer(bootstrap, fenced_id, 10_000)
        wait_for(lambda: "fenced" in _events(daemon, fenced_id), 30, what="the fence in the timeline")
        # Kafka calls it hanging once the last write is older than transaction.max.timeout.ms (15 s in the lab).
        wait_for(lambda: [h for h in daemon.get("/api/v1/hanging").json()["items"] if h["topic"] == topic
                          and h["blocked_groups"]], 90, what="the injected transaction found hanging")
        yield Scene(daemon, topic, hanging, group, reader, fenced_id)
    finally:
        consumer.close()
        uncommitted.close()
        for producer in (zombie, successor):
            if producer is not None:
                producer.close(timeout=5)
        hanging.clear()
        daemon.stop()
        delete_topics_quietly(admin, [topic])
        admin.close()


def test_now_page_shows_the_hanging_transaction_with_its_abort_command(scene: Scene, browser: Browser) -> None:
    api = next(h for h in scene.daemon.get("/api/v1/hanging").json()["items"] if h["topic"] == scene.topic)
    assert api["txn_start_offset"] == scene.hanging.first_offset
    assert api["abort_command"].endswith(
        f" --topic {scene.topic} --partition 0 --start-offset {scene.hanging.first_offset} --execute")
    positions = {g["group_id"]: g["position"] for g in api["blocked_groups"]}
    assert positions == {scene.group: "at_lso", scene.reader: "past_lso"}
    with browser.open(scene.daemon.url + "/") as visit:  # / leads to the console
        visit.assert_clean()
        page = visit.page
        assert page.url.endswith("/console")
        card = page.locator("[data-testid=hanging]", has_text=f"{scene.topic}-0")
        assert card.count() == 1
        assert card.locator("[data-testid=abort-command]").inner_text().strip() == api["abort_command"]
        text = card.inner_text()
        assert scene.group in text and text.count("stuck at the LSO") == 1
        badges = {b.inner_text().strip() for b in card.locator("[data-testid=group-position]").all()}
        assert badges == {"stuck at the LSO", "read_uncommitted, not blocked"}, "a group past the LSO is not stuck"
        assert re.search(r"[\d,]+\s+records are invisible", text)
        assert card.locator("a", has_text="Runbook: hanging transaction").get_attribute("href") == \
            "/console/runbooks#kafkahangingtransaction"
        # One incident, one card: the LSO stall it causes is on this card, not on a second one.
        assert page.locator("[data-testid=stall]", has_text=f"{scene.topic}-0").count() == 0
        assert card.locator("[data-testid=effect-stall]").count() == 1
        assert card.locator("[data-testid=since]").count() == 1


def test_partition_page_charts_hwm_and_lso(scene: Scene, browser: Browser) -> None:
    with browser.open(f"{scene.daemon.url}/console/partitions/lab/{scene.topic}/0") as visit:
        visit.assert_clean()
        page = visit.page
        assert page.locator("[data-testid=offsets] canvas").count() >= 1, "ECharts drew no chart"
        assert page.locator("[data-testid=hanging] [data-testid=abort-command]").count() == 1
        assert int(page.locator("[data-testid=invisible]").inner_text().split()[0]) >= 3


def test_transaction_page_shows_the_fence(scene: Scene, browser: Browser) -> None:
    url = f"{scene.daemon.url}/console/transactions/lab/{quote(scene.fenced_id, safe='')}"
    with browser.open(url) as visit:
        visit.assert_clean()
        page = visit.page
        assert int(page.locator("[data-testid=fence-count]").inner_text()) >= 1
        assert page.locator("[data-testid=transitions] .badge", has_text="fenced").count() >= 1
        assert page.locator("[data-testid=timeline] canvas").count() >= 1
        option = page.locator("[data-testid=timeline]").get_attribute("data-chart") or ""
        assert "fenced: producer" in option


@pytest.mark.parametrize(("path", "ready"), [
    pytest.param("/docs", ".swagger-ui .info .title", id="swagger-ui"),
    pytest.param("/redoc", "h1", id="redoc"),
    pytest.param("/console/runbooks", "#kafkahangingtransaction", id="runbooks"),
])
def test_docs_render_offline(scene: Scene, browser: Browser, path: str, ready: str) -> None:
    with browser.open(scene.daemon.url + path) as visit:
        visit.page.wait_for_selector(ready, timeout=30_000)
        assert "txnwatch" in visit.page.content()
        visit.assert_clean()


def test_a_hanging_ids_page_says_the_coordinator_does_not_know_it(scene: Scene, browser: Browser) -> None:
    api = next(h for h in scene.daemon.get("/api/v1/hanging").json()["items"] if h["topic"] == scene.topic)
    assert api["transactional_id"], "the lab's hanging transaction keeps its id (partition_not_listed)"
    url = f"{scene.daemon.url}/console/transactions/lab/{quote(api['transactional_id'], safe='')}"
    with browser.open(url) as visit:
        visit.assert_clean()
        notice = visit.page.locator("[data-testid=coordinator-unaware]")
        assert "The coordinator does not know this transaction" in notice.inner_text()
        assert f"{scene.topic}-0" in notice.inner_text()


def test_an_unknown_partition_is_a_page_with_a_way_back(scene: Scene, browser: Browser) -> None:
    with browser.open(f"{scene.daemon.url}/console/partitions/lab/{scene.topic}/99") as visit:
        page = visit.page
        assert "no offsets are recorded for partition" in page.locator("[data-testid=error-detail]").inner_text()
        page.locator("[data-testid=way-back] a", has_text="Back to Now").click()
        page.wait_for_url("**/console")
        assert page.locator("[data-testid=hanging]").count() >= 1


def test_groups_show_the_records_a_read_committed_consumer_still_reads(scene: Scene, browser: Browser,
                                                                         lab_cluster: Any) -> None:
    """Six one-record transactions, two aborted: 12 offsets (each record and its marker), 4 records delivered."""
    bootstrap = lab_cluster.bootstrap_servers
    admin = lab_cluster.admin()
    topic = unique_topic_name("console-records")
    create_topic(admin, topic, 1, min(3, len(lab_cluster.brokers)))
    group = f"rc-{topic}"
    producer = faults.transactional_producer(bootstrap, faults.unique_transactional_id("console-records"), 10_000)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, isolation_level="read_committed",
                             enable_auto_commit=False)
    try:
        for index in range(6):
            producer.begin_transaction()
            producer.send(topic, b"one", partition=0).get(timeout=30)
            producer.abort_transaction() if index in (2, 5) else producer.commit_transaction()
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(0, "", -1)})
        api = wait_for(lambda: (r := scene.daemon.get(f"/api/v1/consumer-groups/lab/{group}")).status_code == 200
                       and r.json()["lag_records"] is not None and r.json()["lag_lso"] == 12 and r.json(), 60,
                       what="the group's record lag counted")
        assert (api["lag_lso"], api["lag_hwm"], api["lag_records"]) == (12, 12, 4)
        with browser.open(f"{scene.daemon.url}/console/groups") as visit:
            visit.assert_clean()
            page = visit.page
            row = page.locator(f"[data-testid=group-row][data-group='{group}']")
            assert row.locator("[data-testid=lag-lso]").inner_text().strip() == "12"
            assert row.locator("[data-testid=lag-records]").inner_text().strip() == "4"
            assert "never delivered" in page.locator("[data-testid=lag-explained]").inner_text()
            row.locator("a", has_text=group).click()
            page.wait_for_url(f"**/console/groups/lab/{group}")
            part = page.locator(f"[data-testid=partition-row][data-partition='{topic}-0']")
            assert part.locator("[data-testid=lag-records]").inner_text().strip() == "4"
            assert page.locator("[data-testid=group-facts] [data-testid=lag-hwm]").inner_text().strip() == "12"
            assert page.locator("[data-testid=lag-history] canvas").count() >= 1, "ECharts drew no lag history"
            option = page.locator("[data-testid=lag-history]").get_attribute("data-chart") or ""
            assert '"records (read_committed)"' in option and ",4]" in option, "the stored record lag is charted"
            visit.assert_clean()
    finally:
        consumer.close()
        producer.close(timeout=5)
        delete_topics_quietly(admin, [topic])
        admin.close()


def test_the_printed_abort_command_run_as_printed_ends_the_hanging_transaction(scene: Scene, lab_cluster: Any) -> None:
    """Last in the module: it ends the scene's hanging transaction.  The console's line, pasted into a shell
    with no config file and no txnwatch on PATH, as on-call would: first without --execute (a dry run that
    writes nothing), then as printed.  The LSO reaches the high watermark; both calls are audited because a
    database is configured (TXNWATCH_DATABASE_URL)."""
    import subprocess

    from sqlalchemy import create_engine, text

    from tests.lab.helpers import offsets

    api = next(h for h in scene.daemon.get("/api/v1/hanging").json()["items"] if h["topic"] == scene.topic)
    printed = api["abort_command"]
    env = {"COLUMNS": "100", "PATH": "/usr/bin:/bin", "TXNWATCH_DATABASE_URL": scene.daemon.settings.database_url}
    dry = subprocess.run(["bash", "-c", printed.removesuffix(" --execute")], capture_output=True, text=True,
                         timeout=120, env=env)
    assert dry.returncode == 0, dry.stderr + dry.stdout
    assert "would abort" in dry.stdout and "dry run" in dry.stdout
    admin = lab_cluster.admin()
    try:
        lso, hwm = offsets(admin, scene.topic, 0)
        assert lso == scene.hanging.first_offset < hwm, "the dry run wrote nothing"
        done = subprocess.run(["bash", "-c", printed], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr + done.stdout
        assert "aborted" in done.stdout
        wait_for(lambda: (o := offsets(admin, scene.topic, 0))[0] == o[1], 30, what="the LSO to reach the HWM")
    finally:
        admin.close()
    wait_for(lambda: not [h for h in scene.daemon.get("/api/v1/hanging").json()["items"] if h["topic"] == scene.topic],
             60, what="the hanging episode to end after the abort")
    engine = create_engine(scene.daemon.settings.database_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT actor, dry_run, outcome FROM admin_audit ORDER BY id")).all()
    engine.dispose()
    assert [(r[0], bool(r[1]), r[2]) for r in rows][-2:] == [("cli:bootstrap-server", True, "would abort"),
                                                           ("cli:bootstrap-server", False, "aborted")]
