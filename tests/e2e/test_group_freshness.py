"""The API's consumer groups are as fresh as /metrics: a group that appears after the daemon started is in
/api/v1/consumer-groups (and its own route) within two polls of its first commit, with the lag /metrics exports,
though the stored lag samples are written only every lag_sample_interval_seconds (300 s, the default here).

Worker mode (api.workers >= 1, the groups through runtime/publication.py) is held to the same in
tests/e2e/test_api_workers_process.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import Daemon, start_daemon, wait_for
from tests.kafka.groups import commit_offsets
from txnwatch.lab import faults

pytestmark = pytest.mark.lab


@pytest.fixture
def daemon(lab_cluster: Any, sqlite_url: str) -> Iterator[Daemon]:
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers,
                                    request_timeout_ms=4000)])
    try:
        yield d
    finally:
        d.stop()


SERIES = ("txnwatch_consumergroup_lag_lso", "txnwatch_consumergroup_lag_hwm", "kafka_consumergroup_lag")


def metric_lags(text: str, group: str, cluster: str = "lab") -> dict[tuple[str, int], tuple[int, ...]]:
    """(topic, partition) -> the SERIES of ``group`` in /metrics, in that order."""
    found: dict[str, dict[tuple[str, int], float]] = {name: {} for name in SERIES}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = sample.labels
            if (sample.name in found and labels.get("consumergroup") == group
                    and labels.get("cluster", cluster) == cluster):
                found[sample.name][(labels["topic"], int(labels["partition"]))] = sample.value
    return {tp: tuple(int(found[name][tp]) for name in SERIES) for tp in found[SERIES[0]]}


def polls_of(view: Any) -> Callable[[], int]:
    """Completed polls of the lab cluster, as the collector counts them."""
    return lambda: getattr(view.get("lab"), "polls", 0)


def listed(base: str, group: str) -> dict[str, Any] | None:
    """The group's item of GET /api/v1/consumer-groups (every page), or None."""
    params: dict[str, Any] = {"limit": 1000}
    while True:
        response = httpx.get(f"{base}/api/v1/consumer-groups", params=params, timeout=10)
        assert response.status_code == 200, response.text
        page = response.json()
        for item in page["items"]:
            if item["group_id"] == group:
                return item
        if page["next_cursor"] is None:
            return None
        params["cursor"] = page["next_cursor"]


def appears_within_two_polls(base: str, polls: Callable[[], int], group: str, offsets: dict[tuple[str, int], int], bootstrap: str) -> dict[str, Any]:
    """Commit ``offsets`` for the new ``group``; its API detail once both routes list it, having checked that no
    more than two polls completed after the commit (the poll under way then may have read the offsets before it).
    Counted from the commit's answer: a commit waits for the group's coordinator, polls go on meanwhile."""
    assert listed(base, group) is None
    commit_offsets(bootstrap, group, offsets)
    before = polls()

    def both() -> dict[str, Any] | None:
        detail = httpx.get(f"{base}/api/v1/consumer-groups/lab/{group}", timeout=10)
        item = listed(base, group)
        if detail.status_code != 200 or item is None:
            assert polls() - before <= 2, f"{polls() - before} polls after the commit and the group is not shown"
            return None
        return {"item": item, "detail": detail.json(), "polls": polls() - before}

    return wait_for(both, 60, interval=0.1, what=f"group {group} in the API")


def test_a_new_group_is_in_the_api_within_two_polls_with_the_lag_metrics_export(
        daemon: Daemon, lab_cluster: Any, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=2)
    bootstrap = lab_cluster.bootstrap_servers
    wait_for(lambda: daemon.get("/readyz").status_code == 200, 60, what="a first poll")
    # The open transaction must outlive the test's reads (the lab's max timeout, 15 s; the group shows in ~2 s).
    producer = faults.transactional_producer(bootstrap, faults.unique_transactional_id("fresh"), 15_000)
    try:
        producer.begin_transaction()
        for partition in (0, 1):
            for _ in range(5):
                producer.send(topic, b"committed", partition=partition)
        producer.commit_transaction()
        producer.begin_transaction()  # left open: the LSO stays at 6 while the HWM moves on
        for _ in range(4):
            producer.send(topic, b"open", partition=0)
        producer.flush()
        group = f"fresh-{topic}"
        seen = appears_within_two_polls(daemon.url, polls_of(daemon.runtime.state), group,
                                        {(topic, 0): 2, (topic, 1): 1}, bootstrap)
        detail, item = seen["detail"], seen["item"]
        parts = {(p["topic"], p["partition"]): (p["lag_lso"], p["lag_hwm"]) for p in detail["partition_lags"]}
        # 5 records + a marker committed (LSO 6); partition 0 also holds 4 open records (HWM 10).
        assert parts == {(topic, 0): (4, 8), (topic, 1): (5, 5)}
        # txnwatch's two series and kafka_exporter's (HWM - committed: no marker ends these partitions). /metrics
        # serves the render made after a poll (outside the poll: core/pollwindow.py), so it may show the group one
        # render after the API does: wait for that render, never for more than two polls more.
        shown = polls_of(daemon.runtime.state)()

        def exported() -> dict[tuple[str, int], tuple[int, ...]] | None:
            lags = metric_lags(daemon.get("/metrics").text, group)
            if not lags:
                assert polls_of(daemon.runtime.state)() - shown <= 2, "/metrics lacks the group two polls after the API"
                return None
            return lags

        assert wait_for(exported, 30, interval=0.1, what=f"group {group} in /metrics") == {
            tp: (lso, hwm, hwm) for tp, (lso, hwm) in parts.items()}
        assert (item["lag_lso"], item["lag_hwm"], item["partitions"]) == (9, 13, 2)
        print(f"shown {seen['polls']} poll(s) after the commit")
    finally:
        producer.abort_transaction()
        producer.close(timeout=5)
