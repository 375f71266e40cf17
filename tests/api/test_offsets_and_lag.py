"""GET /api/v1/partitions and /api/v1/consumer-groups: latest samples only."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient
from sqlalchemy import update

from tests.api.factory import PROD, STAGING, UNREADABLE
from tests.api.helpers import flat, invalid_param, ok, walk
from txnwatch.core.epoch import to_ms
from txnwatch.core.findings import Findings, GroupLag
from txnwatch.core.model import ClusterSnapshot, TopicPartition
from txnwatch.core.views import ClusterView
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.store import models as m
from txnwatch.store.findings import findings_rows


def test_partitions_show_the_latest_sample_only(client: TestClient) -> None:
    items = ok(client, "/api/v1/partitions", cluster=PROD)["items"]
    keyed = {(i["topic"], i["partition"]): i for i in items}
    assert len(items) == 10
    orders0 = keyed[("orders", 0)]
    assert (orders0["high_watermark"], orders0["last_stable_offset"], orders0["hwm_minus_lso"],
            orders0["log_start_offset"], orders0["open_transactions"]) == (1920, 420, 1500, 10, 1)
    assert keyed[("payments-eu", 0)]["hwm_minus_lso"] == 10
    assert [(i["topic"], i["partition"]) for i in items] == sorted(keyed), "ordered by topic, partition"


def test_partitions_of_all_clusters_topic_filter_and_pages(client: TestClient) -> None:
    everything = ok(client, "/api/v1/partitions")["items"]
    assert [i["cluster"] for i in everything].count(STAGING) == 1
    walked = flat(walk(client, "/api/v1/partitions", limit=3))
    assert walked == everything
    orders = ok(client, "/api/v1/partitions", topic="orders")["items"]
    assert [(i["cluster"], i["partition"]) for i in orders] == [(PROD, 0), (PROD, 1), (PROD, 2), (PROD, 3),
                                                                (STAGING, 0)]
    assert ok(client, "/api/v1/partitions", topic="payments")["items"][0]["topic"] == "payments"
    invalid_param(client, "/api/v1/partitions", "topic", topic="no/slashes")
    invalid_param(client, "/api/v1/partitions", "cursor", cursor="eyJ4Ijox")


def test_consumer_groups_latest_lag_vs_lso_and_hwm(client: TestClient) -> None:
    groups = ok(client, "/api/v1/consumer-groups")["items"]
    assert [(g["cluster"], g["group_id"]) for g in groups] == [(PROD, "audit/readers"), (PROD, "orders-consumer")]
    orders = groups[1]
    assert (orders["partitions"], orders["lag_lso"], orders["lag_hwm"]) == (4, 40, 1730)
    assert orders["max_lag_seconds"] == 30.0
    assert orders["topics"] == ["orders"]
    assert groups[0]["topics"] == ["payments", "payments-eu"]
    assert (groups[0]["lag_seconds_unknown"], groups[1]["lag_seconds_unknown"]) == (1, 0)
    assert groups[0]["max_lag_seconds"] == 2.0  # the unknown partition left out
    assert flat(walk(client, "/api/v1/consumer-groups", limit=1)) == groups
    assert ok(client, "/api/v1/consumer-groups", cluster=STAGING)["items"] == []


def test_one_group_per_partition(client: TestClient) -> None:
    group = ok(client, f"/api/v1/consumer-groups/{PROD}/orders-consumer")
    lags = [(p["partition"], p["committed_offset"], p["lag_lso"], p["lag_hwm"], p["lag_seconds"])
            for p in group["partition_lags"]]
    assert lags == [(0, 400, 20, 1520, 30.0), (1, 990, 0, 10, 0.0), (2, 800, 0, 0, None), (3, 400, 20, 200, 12.5)]
    assert (group["lag_lso"], group["lag_hwm"]) == (40, 1730)
    assert {p["lag_seconds_unknown"] for p in group["partition_lags"]} == {None}
    audit = ok(client, f"/api/v1/consumer-groups/{PROD}/audit/readers")
    assert (audit["partitions"], audit["lag_seconds_unknown"]) == (2, 1)
    eu = [p for p in audit["partition_lags"] if p["topic"] == "payments-eu"]
    assert [(p["lag_seconds"], p["lag_seconds_unknown"]) for p in eu] == [(None, UNREADABLE)]


def test_a_group_that_stopped_committing_shows_where_it_stopped(client: TestClient) -> None:
    old = ok(client, f"/api/v1/consumer-groups/{PROD}/old-group")
    latest = ok(client, f"/api/v1/consumer-groups/{PROD}/orders-consumer")
    assert old["sampled_at"] < latest["sampled_at"]
    assert old["lag_lso"] == 800


def test_unknown_group_is_404(client: TestClient) -> None:
    for path in (f"{PROD}/nobody", f"{STAGING}/orders-consumer", "nope/orders-consumer"):
        response = client.get(f"/api/v1/consumer-groups/{path}")
        assert response.status_code == 404, path
        assert "unknown cluster" in response.json()["detail"] or "no committed offsets" in response.json()["detail"]


def test_record_lag_comes_from_the_latest_poll_for_the_sampled_committed_offsets(client: TestClient,
                                                                                runtime: Runtime) -> None:
    def publish(committed_3: int) -> None:
        rows = [(0, 400, 7), (1, 990, 0), (2, 800, 0), (3, committed_3, 9)]
        lags = tuple(GroupLag(PROD, "orders-consumer", TopicPartition("orders", p), c, None, None, None,
                              lag_records=n) for p, c, n in rows)
        runtime.state.publish(ClusterView(name=PROD, up=True, findings=Findings(PROD, 0, lags=lags)))

    before = runtime.state.get(PROD)
    try:
        publish(committed_3=400)
        group = ok(client, f"/api/v1/consumer-groups/{PROD}/orders-consumer")
        assert [p["lag_records"] for p in group["partition_lags"]] == [7, 0, 0, 9]
        assert (group["lag_records"], group["lag_lso"]) == (16, 40)
        publish(committed_3=401)  # the poll saw another committed offset than the stored sample: not this one's
        group = ok(client, f"/api/v1/consumer-groups/{PROD}/orders-consumer")
        assert [p["lag_records"] for p in group["partition_lags"]] == [7, 0, 0, None]
        assert group["lag_records"] is None
    finally:
        if before is not None:
            runtime.state.publish(before)


def test_record_lag_stored_with_the_sample_is_answered_without_the_collector(client: TestClient,
                                                                             runtime: Runtime) -> None:
    """Since migration 0009 the sample keeps its record lag: the answer no longer needs the collector's memory."""
    L = m.ConsumerLagSample
    group = (L.group_id == "orders-consumer", L.partition == 1)
    with runtime.sessions.begin() as session:
        session.execute(update(L).where(*group).values(lag_records=11))
    try:
        answer = ok(client, f"/api/v1/consumer-groups/{PROD}/orders-consumer")
        assert [p["lag_records"] for p in answer["partition_lags"]] == [None, 11, None, None]
        assert answer["lag_records"] is None, "not every partition's is known"
    finally:
        with runtime.sessions.begin() as session:
            session.execute(update(L).where(*group).values(lag_records=None))


def test_the_recorder_writes_the_record_lag_of_each_sample() -> None:
    at = datetime(2026, 11, 26, tzinfo=UTC)
    snapshot = ClusterSnapshot(cluster=PROD, taken_at_ms=to_ms(at), duration_ms=1)
    lags = (GroupLag(PROD, "g", TopicPartition("orders", 0), 5, 9, 7, None, lag_records=6),
            GroupLag(PROD, "g", TopicPartition("orders", 1), 5, 9, 7, None))
    inserts, _ = findings_rows(snapshot, Findings(PROD, 0, lags=lags), at)
    rows = dict(inserts)[m.table(m.ConsumerLagSample)]
    assert [r["lag_records"] for r in rows] == [6, None]


def _stored_latest(runtime: Runtime) -> datetime:
    from sqlalchemy import func, select

    with runtime.sessions() as session:
        at = session.scalar(select(func.max(m.ConsumerLagSample.sampled_at)))
    assert at is not None
    return at


def test_current_lag_comes_from_the_latest_poll_where_it_is_newer_than_the_stored_samples(
        client: TestClient, runtime: Runtime) -> None:
    """/metrics' lag is the latest poll's; the stored samples are written every lag_sample_interval_seconds. A group
    the poll found first (new-group) is listed at once; one the poll no longer finds (old-group) keeps its stored
    sample in its own route; a poll older than the stored samples (another replica polls) leaves them the answer."""
    stored_at = _stored_latest(runtime)

    def publish(at: datetime) -> None:
        lags = (GroupLag(PROD, "orders-consumer", TopicPartition("orders", 1), 995, 5, 3, 1.5, lag_records=3),
                GroupLag(PROD, "orders-consumer", TopicPartition("orders", 0), 410, 1510, 10, 20.0, lag_records=10),
                GroupLag(PROD, "new-group", TopicPartition("payments", 0), 1, 4, 4, None))
        snapshot = ClusterSnapshot(cluster=PROD, taken_at_ms=to_ms(at), duration_ms=1)
        runtime.state.publish(ClusterView(name=PROD, up=True, snapshot=snapshot,
                                          findings=Findings(PROD, to_ms(at), lags=lags)))

    before = runtime.state.get(PROD)
    try:
        polled_at = stored_at.replace(microsecond=0) + timedelta(minutes=1)
        publish(polled_at)
        groups = ok(client, "/api/v1/consumer-groups", cluster=PROD)["items"]
        assert [(g["group_id"], g["partitions"], g["lag_lso"], g["lag_hwm"], g["max_lag_seconds"], g["topics"])
                for g in groups] == [("new-group", 1, 4, 4, None, ["payments"]),
                                     ("orders-consumer", 2, 13, 1515, 20.0, ["orders"])]
        assert {datetime.fromisoformat(g["sampled_at"].replace("Z", "+00:00")) for g in groups} == {polled_at}
        assert flat(walk(client, "/api/v1/consumer-groups", limit=1, cluster=PROD)) == groups
        orders = ok(client, f"/api/v1/consumer-groups/{PROD}/orders-consumer")
        assert [(p["partition"], p["committed_offset"], p["lag_lso"], p["lag_hwm"], p["lag_records"])
                for p in orders["partition_lags"]] == [(0, 410, 10, 1510, 10), (1, 995, 3, 5, 3)]
        assert (orders["lag_lso"], orders["lag_records"]) == (13, 13)
        assert ok(client, f"/api/v1/consumer-groups/{PROD}/new-group")["lag_records"] is None
        assert ok(client, f"/api/v1/consumer-groups/{PROD}/old-group")["lag_lso"] == 800  # its stored sample

        publish(stored_at - timedelta(minutes=1))  # older than the stored samples: they answer again
        groups = ok(client, "/api/v1/consumer-groups", cluster=PROD)["items"]
        assert [(g["group_id"], g["lag_lso"]) for g in groups] == [("audit/readers", groups[0]["lag_lso"]),
                                                                   ("orders-consumer", 40)]
        assert client.get(f"/api/v1/consumer-groups/{PROD}/new-group").status_code == 404
    finally:
        if before is not None:
            runtime.state.publish(before)
