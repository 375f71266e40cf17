"""/metrics on a live daemon: parseable, and series of vanished objects disappear."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.daemon import start_daemon, wait_for

pytestmark = pytest.mark.lab


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_metrics_parse_and_vanished_partitions_disappear(lab_cluster: Any, new_topic: Callable[..., str],
                                                         sqlite_url: str) -> None:
    from txnwatch.lab.topics import delete_topics_quietly

    topic = new_topic(partitions=2)
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)])
    try:
        key = ("kafka_topic_partition_current_offset",
               frozenset({("cluster", "lab"), ("topic", topic), ("partition", "1")}))
        wait_for(lambda: key in samples(d.get("/metrics").text), 30, what="the new topic's partition series")
        parsed = samples(d.get("/metrics").text)
        assert parsed[("txnwatch_cluster_up", frozenset({("cluster", "lab")}))] == 1.0
        assert ("txnwatch_polls_total", frozenset({("cluster", "lab")})) in parsed
        admin = lab_cluster.admin()
        try:
            delete_topics_quietly(admin, [topic])
        finally:
            admin.close()
        wait_for(lambda: key not in samples(d.get("/metrics").text), 60, what="the deleted topic's series to vanish")
    finally:
        d.stop()


def test_live_metrics_match_the_documented_contract(lab_cluster: Any, new_topic: Callable[..., str],
                                                    sqlite_url: str) -> None:
    """docs/metrics.yaml is what dashboards and alert rules query: every family there must be served."""
    import pathlib

    import yaml

    contract = yaml.safe_load((pathlib.Path(__file__).resolve().parents[2] / "docs" / "metrics.yaml").read_text())
    documented = {m["name"].removesuffix("_total") if m["type"] == "counter" else m["name"]: set(m["labels"])
                  for m in contract["metrics"]}
    new_topic(partitions=1)
    d = start_daemon(database_url=sqlite_url, poll_interval_seconds=1,
                     clusters=[dict(name="lab", bootstrap_servers=lab_cluster.bootstrap_servers)])
    try:
        wait_for(lambda: samples(d.get("/metrics").text).get(("txnwatch_cluster_up", frozenset({("cluster", "lab")}))),
                 30, what="a successful poll")
        families = {f.name: f for f in text_string_to_metric_families(d.get("/metrics").text)}
        assert set(families) == set(documented), (
            f"undocumented: {sorted(set(families) - set(documented))}; missing: {sorted(set(documented) - set(families))}")
        for name, family in families.items():
            for sample in family.samples:
                labels = set(sample.labels) - {"le"}
                assert labels == documented[name], f"{sample.name}: labels {sorted(labels)} != {sorted(documented[name])}"
    finally:
        d.stop()
