"""docs/metrics.md and docs/metrics.yaml agree, and rules and dashboards use only contract metrics."""

from __future__ import annotations

import re

import yaml

from tests.deploy.tools import (
    PROMETHEUS_BUILTIN,
    ROOT,
    RULES,
    contract,
    dashboard_exprs,
    dashboard_files,
    load_dashboard,
    promql_metric_names,
    queryable_names,
)

NAME = re.compile(r"^(txnwatch|kafka)_[a-z0-9_]+$")


def test_contract_is_well_formed() -> None:
    names = [m["name"] for m in contract()]
    assert len(names) == len(set(names)), "duplicate metric names"
    for m in contract():
        assert NAME.match(m["name"]), m["name"]
        assert m["type"] in {"gauge", "counter", "histogram"}, m
        assert (m["type"] == "counter") == m["name"].endswith("_total"), f"{m['name']}: counters and only counters end in _total"
        assert m["help"].strip(), m["name"]
        assert m["scope"] in {"cluster", "process"}, m
        if m["scope"] == "cluster":
            assert m["labels"][0] == "cluster", f"{m['name']}: cluster-scoped metrics carry the cluster label first"
        else:
            assert "cluster" not in m["labels"]
        per_partition = "partition" in m["labels"] or "consumergroup" in m["labels"]
        if per_partition and "transactional_id" in m["labels"]:
            assert m["name"].startswith(("txnwatch_hanging_", "txnwatch_lso_stall_")), \
                f"{m['name']}: transactional_id on per-partition series only for hanging/stall series"


def test_kafka_exporter_names_keep_their_labels() -> None:
    by_name = {m["name"]: m for m in contract()}
    for name in ("kafka_consumergroup_lag", "kafka_consumergroup_current_offset"):
        assert by_name[name]["labels"] == ["cluster", "consumergroup", "topic", "partition"]
    for name in ("kafka_topic_partition_current_offset", "kafka_topic_partition_oldest_offset"):
        assert by_name[name]["labels"] == ["cluster", "topic", "partition"]
    assert "txnwatch_consumergroup_lag_lso" in by_name


def test_markdown_tables_match_yaml() -> None:
    rows = re.findall(r"^\| `([a-z0-9_]+)` \| (\w+) \| ([^|]*) \|", (ROOT / "docs" / "metrics.md").read_text(), re.M)
    documented = {name: (kind, re.findall(r"`([a-z_]+)`", labels)) for name, kind, labels in rows}
    expected = {m["name"]: (m["type"], m["labels"]) for m in contract()}
    assert documented == expected


def rule_exprs() -> list[tuple[str, str]]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return [(r.get("alert") or r.get("record"), r["expr"]) for g in groups for r in g["rules"]]


def test_rules_use_only_contract_metrics() -> None:
    allowed = queryable_names() | PROMETHEUS_BUILTIN
    unknown = {where: sorted(promql_metric_names(expr) - allowed) for where, expr in rule_exprs()}
    assert {k: v for k, v in unknown.items() if v} == {}


def test_dashboards_use_only_contract_metrics() -> None:
    allowed = queryable_names()
    unknown: dict[str, list[str]] = {}
    for path in dashboard_files():
        for where, expr in dashboard_exprs(load_dashboard(path)):
            bad = promql_metric_names(expr) - allowed
            if bad:
                unknown[f"{path.name}: {where}"] = sorted(bad)
    assert unknown == {}


def test_tokenizer_finds_names() -> None:
    expr = ('sum by (cluster, le) (rate(txnwatch_verification_time_seconds_bucket{cluster=~"a|b",x="y z"}[5m])) '
            '/ on(cluster) group_left(state) foo:bar offset 5m > 1e-9 and bool up')
    assert promql_metric_names(expr) == {"txnwatch_verification_time_seconds_bucket", "foo:bar", "up"}


def test_runbook_anchors_exist() -> None:
    text = (ROOT / "docs" / "runbooks.md").read_text()
    anchors = {re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
               for h in re.findall(r"^#+ (.+)$", text, re.M)}
    groups = yaml.safe_load(RULES.read_text())["groups"]
    for rule in (r for g in groups for r in g["rules"]):
        url = rule["annotations"]["runbook_url"]
        # Absolute, as pages need them: the project's runbooks or a txnwatch console's own copy.
        assert re.match(r"^https?://[^ ]+/(docs/runbooks\.md|console/runbooks)#", url), url
        assert url.split("#", 1)[1] in anchors, f"{rule['alert']}: no heading for {url}"
        assert rule["labels"]["severity"] in {"page", "ticket"}
        assert {"summary", "description", "runbook_url"} <= set(rule["annotations"])


def test_every_alert_has_a_promtool_test() -> None:
    from tests.deploy.tools import RULES_TEST
    tested = {t["alertname"] for case in yaml.safe_load(RULES_TEST.read_text())["tests"]
              for t in case.get("alert_rule_test", []) if t.get("exp_alerts")}
    alerts = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"] if "alert" in r}
    assert alerts - tested == set()




def test_a_missing_tool_fails_and_never_skips() -> None:
    import pytest

    from tests.deploy.tools import tool

    with pytest.raises(pytest.fail.Exception, match="make test"):
        tool("no-such-tool-txnwatch")
