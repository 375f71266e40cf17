"""What the dashboards give on-call beyond graphs: variables, links to the console and runbooks, versions,
state timelines, annotations, readable tables with the start offset, and top-N that does not jump."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.deploy.tools import contract, promql_metric_names
from txnwatch.core.vocabulary import ALERTS, REASONS

DASHBOARDS = sorted((Path(__file__).resolve().parents[2] / "dashboards").glob("*.json"))


def _load(name: str) -> dict[str, Any]:
    return json.loads((DASHBOARDS[0].parent / f"txnwatch-{name}.json").read_text())


def _panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dash["panels"] if p["type"] != "row"]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.stem)
def test_every_dashboard_is_versioned_annotated_and_links_the_console(path: Path) -> None:
    dash = json.loads(path.read_text())
    assert isinstance(dash["version"], int) and dash["version"] >= 1
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"datasource", "cluster", "txnwatch_url"} <= names
    for panel in _panels(dash):
        assert any(link["url"] == "${txnwatch_url}/console" for link in panel["links"]), panel["title"]
    anchors = {a.anchor for a in ALERTS}
    for panel in _panels(dash):
        for link in panel["links"]:
            if "#" in link["url"]:
                assert link["url"].rsplit("#", 1)[1] in anchors, link
    known = {m["name"] for m in contract()} | {f"{m['name']}_total" for m in contract()}
    annotations = [a for a in dash["annotations"]["list"] if "expr" in a]
    assert {a["name"] for a in annotations} == {"Alerts firing", "LSO stall episodes"}
    for a in annotations:
        assert promql_metric_names(a["expr"]) <= known, a["expr"]


def test_topic_and_group_variables_filter_the_panels() -> None:
    partitions, lag = _load("partitions-lso"), _load("consumer-lag")
    assert "topic" in {v["name"] for v in partitions["templating"]["list"]}
    assert {"topic", "group"} <= {v["name"] for v in lag["templating"]["list"]}
    per_partition = [t["expr"] for p in _panels(partitions) for t in p["targets"] if "txnwatch_partition_" in t["expr"]]
    assert per_partition and all('topic=~"$topic"' in e for e in per_partition)
    assert all('consumergroup=~"$group"' in t["expr"] for p in _panels(lag) for t in p["targets"])


def test_state_timelines_for_up_down_and_stalls() -> None:
    kinds = {p["title"]: p for p in _panels(_load("overview")) + _panels(_load("partitions-lso"))
             if p["type"] == "state-timeline"}
    assert set(kinds) == {"Cluster up / down", "LSO stalls per partition"}
    up = kinds["Cluster up / down"]["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert (up["1"]["text"], up["0"]["text"]) == ("up", "down")


def test_hanging_and_stall_tables_show_the_start_offset_with_readable_columns() -> None:
    tables = {p["title"]: p for p in _panels(_load("partitions-lso")) if p["type"] == "table"}
    for title in ("Hanging transactions", "Active LSO stalls"):
        renames = tables[title]["transformations"][0]["options"]["renameByName"]
        assert renames["start_offset"] == "Start offset (abort at)" and renames["Value"] != "Value"
    mapping = tables["Hanging transactions"]["fieldConfig"]["overrides"][0]["properties"][0]["value"][0]["options"]
    assert {k: v["text"] for k, v in mapping.items()} == {r.value: t.title for r, t in REASONS.items()}
    for dash in DASHBOARDS:
        for p in _panels(json.loads(dash.read_text())):
            if p["type"] == "table":
                assert p["options"]["sortBy"][0]["displayName"] != "Value", (dash.stem, p["title"])


def test_top_n_over_time_is_chosen_once_for_the_range() -> None:
    for dash in DASHBOARDS:
        for p in _panels(json.loads(dash.read_text())):
            for t in p["targets"]:
                if "topk(" in t["expr"] and not t.get("instant"):
                    assert re.search(r"topk\(\d+, max_over_time\(.*\[\$__range\] @ end\(\)\)\)", t["expr"]), \
                        (dash.stem, p["title"], t["expr"])
