"""promtool on the rules (syntax and unit tests) and on every dashboard expression; dashboards up to date."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tests.deploy.tools import (
    ROOT,
    RULES,
    RULES_TEST,
    dashboard_exprs,
    dashboard_files,
    grafana_to_promql,
    load_dashboard,
    run,
    tool,
)


def test_promtool_check_rules() -> None:
    run(tool("promtool"), "check", "rules", str(RULES))


def test_promtool_unit_tests() -> None:
    run(tool("promtool"), "test", "rules", str(RULES_TEST), cwd=RULES_TEST.parent)


def test_dashboard_expressions_parse(tmp_path: Path) -> None:
    """Each dashboard expression becomes a recording rule, so promtool's own parser validates it."""
    rules = []
    for path in dashboard_files():
        for i, (where, expr) in enumerate(dashboard_exprs(load_dashboard(path))):
            rules.append({"record": f"dashboard:{path.stem.replace('-', '_')}:{i}",
                          "expr": grafana_to_promql(expr), "labels": {"where": where}})
    assert len(rules) > 40
    file = tmp_path / "dashboards.rules.yaml"
    file.write_text(yaml.safe_dump({"groups": [{"name": "dashboards", "rules": rules}]}))
    run(tool("promtool"), "check", "rules", str(file))


def test_dashboards_are_up_to_date() -> None:
    proc = run(sys.executable, str(ROOT / "dashboards" / "build.py"), "--check", check=False)
    assert proc.returncode == 0, proc.stderr


EXPECTED = {"overview", "transactions", "partitions-lso", "consumer-lag", "verification", "coordinator-history"}


def test_dashboard_set_and_conventions() -> None:
    assert {p.stem.removeprefix("txnwatch-") for p in dashboard_files()} == EXPECTED
    uids = set()
    for path in dashboard_files():
        dash = load_dashboard(path)
        uids.add(dash["uid"])
        variables = {v["name"]: v for v in dash["templating"]["list"]}
        assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
        assert variables["cluster"]["datasource"]["uid"] == "${datasource}"
        for p in dash["panels"]:
            if p["type"] == "row":
                continue
            assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert len(p["description"]) > 20, f"{path.name}: {p['title']} needs a description"
            assert "unit" in p["fieldConfig"]["defaults"], p["title"]
            for t in p["targets"]:
                assert 'cluster=~"$cluster"' in t["expr"] or "txnwatch_db_up" in t["expr"] \
                    or "txnwatch_leader" in t["expr"] or "txnwatch_outbox" in t["expr"], \
                    f"{path.name}: {p['title']}: filter by the cluster variable"
            red = [s for s in p["fieldConfig"]["defaults"]["thresholds"]["steps"] if s["color"] == "red"]
            if red:
                assert any(w in p["description"].lower() for w in ("red", "runbook")), \
                    f"{path.name}: {p['title']}: say what to do when it is red"
    assert len(uids) == len(EXPECTED)


def test_chart_copies_are_identical() -> None:
    files = ROOT / "helm" / "txnwatch" / "files"
    assert (files / "txnwatch-rules.yaml").read_text() == RULES.read_text()
    for path in dashboard_files():
        assert (files / "dashboards" / path.name).read_text() == path.read_text()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_dashboard_grid_has_no_overlap(name: str) -> None:
    dash = load_dashboard(ROOT / "dashboards" / f"txnwatch-{name}.json")
    cells: set[tuple[int, int]] = set()
    for p in dash["panels"]:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{p['title']} overlaps"
                cells.add((x, y))
