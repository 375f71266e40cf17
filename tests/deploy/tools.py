"""Shared helpers of the deploy tests: required external tools and PromQL name extraction."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = ROOT / ".venv" / "bin"
CHART = ROOT / "helm" / "txnwatch"
RULES = ROOT / "deploy" / "prometheus" / "txnwatch-rules.yaml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "txnwatch-rules.test.yaml"
DASHBOARDS = ROOT / "dashboards"


def tool(name: str) -> str:
    """Path of a required tool; a missing tool FAILS the test (make test installs it), never skips."""
    found = shutil.which(name) or (str(VENV_BIN / name) if (VENV_BIN / name).exists() else None)
    if found is None:
        pytest.fail(f"{name} is not installed: run `make test` (scripts/bootstrap.sh --test installs it via "
                    f"scripts/install-{'helm' if name == 'helm' else 'promtool'}.sh)", pytrace=False)
    return found


def run(*args: str, check: bool = True, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(list(args), capture_output=True, text=True, timeout=120, **kwargs)
    if check and proc.returncode != 0:
        pytest.fail(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}", pytrace=False)
    return proc


def contract() -> list[dict[str, Any]]:
    return list(yaml.safe_load((ROOT / "docs" / "metrics.yaml").read_text())["metrics"])


def queryable_names() -> set[str]:
    """Every series name PromQL may use: counters as listed, histograms with their three suffixes."""
    names: set[str] = set()
    for m in contract():
        if m["type"] == "histogram":
            names |= {m["name"] + s for s in ("_bucket", "_sum", "_count")}
        else:
            names.add(m["name"])
    return names


# Series Prometheus itself creates for every scrape target.
PROMETHEUS_BUILTIN = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}

_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
             "offset", "inf", "nan", "atan2", "start", "end"}


def promql_metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (a light tokenizer; promtool checks the syntax separately)."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)       # strings
    s = re.sub(r"\{[^}]*\}", "", s)                                            # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)                                           # ranges / subqueries
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", s):
        word, rest = m.group(0), s[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in _KEYWORDS:
            continue                                                           # function call or keyword
        if re.fullmatch(r"\d", s[m.start() - 1:m.start()] or "x") or (m.start() and s[m.start() - 1] == "."):
            continue
        names.add(word)
    return names


def dashboard_files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def dashboard_exprs(dash: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(where, expr) of every PromQL expression in a dashboard: panel targets and query variables."""
    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for p in items:
            yield p
            yield from panels(p.get("panels", []))
    for p in panels(dash.get("panels", [])):
        for t in p.get("targets", []):
            yield f"panel {p.get('title')!r} target {t.get('refId')}", t["expr"]
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((.*),\s*\w+\)", q)
            yield f"variable {v['name']}", m.group(1) if m else q


def grafana_to_promql(expr: str) -> str:
    """Replaces Grafana's template variables by values Prometheus accepts."""
    for var, value in (("$__rate_interval", "5m"), ("$__interval", "1m"), ("$__range", "1h"), ("$cluster", ".*")):
        expr = expr.replace(var, value)
    return expr


def load_dashboard(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))
