"""Group filters and caps on a live daemon: /metrics, the API's group list and the cluster's counts agree (issue 23, item 5)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import start_daemon, wait_for

pytestmark = pytest.mark.lab


def lagging_groups(text: str) -> set[str]:
    return {s.labels["consumergroup"] for family in text_string_to_metric_families(text)
            if family.name == "kafka_consumergroup_lag" for s in family.samples}


def omitted(text: str, kind: str, reason: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "txnwatch_cardinality_omitted" and s.labels == {"cluster": "lab", "kind": kind,
                                                                          "reason": reason}:
                return s.value
    return None


def test_filters_and_caps_agree_on_metrics_and_api(lab_cluster: Any, new_topic: Callable[..., str],
                                                   sqlite_url: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    topic = new_topic(partitions=1)
    producer = KafkaProducer(bootstrap_servers=lab_cluster.bootstrap_servers)
    for _ in range(10):
        producer.send(topic, b"x", partition=0)
    producer.flush(timeout=30)
    producer.close()
    groups = [f"cap-{topic}-{i}" for i in range(5)]
    for i, group in enumerate(groups):  # offset-only groups, committed at i: group 0 lags most
        consumer = KafkaConsumer(bootstrap_servers=lab_cluster.bootstrap_servers, group_id=group,
                                 enable_auto_commit=False)
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(i, "", -1)})
        consumer.close()
    # Only this test's groups (the lab is shared), and not the last one; then the 2 most lagging.
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1, lag_sample_interval_seconds=0,
                     clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers,
                                    topics_include=[topic], groups_include=[f"cap-{topic}-.*"],
                                    groups_exclude=[f"cap-{topic}-4"], max_groups=2)])
    try:
        def metrics_with_lag() -> str | None:
            text = d.get("/metrics").text
            return text if lagging_groups(text) else None

        text = wait_for(metrics_with_lag, 30, what="group lag on /metrics")
        assert lagging_groups(text) == {groups[0], groups[1]}
        assert omitted(text, "consumer_group", "cap") == 2  # groups 2 and 3
        assert (omitted(text, "consumer_group", "filter") or 0) >= 1  # group 4, and any other group of the lab
        listed = wait_for(lambda: d.get("/api/v1/consumer-groups", params={"cluster": "lab"}).json()["items"] or None,
                          30, what="the groups in the API")
        assert {g["group_id"] for g in listed} == {groups[0], groups[1]}
        assert d.get(f"/api/v1/consumer-groups/lab/{groups[2]}").status_code == 404
        counts = {(o["kind"], o["reason"]): o["count"] for o in d.get("/api/v1/clusters/lab").json()["omitted"]}
        assert counts[("consumer_group", "cap")] == 2
    finally:
        d.stop()
