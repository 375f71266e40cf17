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
    for var, value in (("$__rate_interval", "5m"), ("$__interval", "1m"), ("$__range", "1h")):
        expr = expr.replace(var, value)
    # The dashboards' own variables (cluster, topic, group, ...) all filter label matchers: "All" is ".*".
    return re.sub(r"\$\{?([A-Za-z]\w*)\}?", ".*", expr)


def load_dashboard(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


# --- what Kubernetes would hand the pod ------------------------------------------------------------------


def secret_data(docs: list[dict[str, Any]], name: str) -> dict[str, bytes]:
    """A rendered Secret's values as the bytes Kubernetes stores (``data`` is base64, ``stringData`` UTF-8)."""
    import base64

    (secret,) = [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"] == name]
    values = {k: str(v).encode() for k, v in (secret.get("stringData") or {}).items()}
    values.update({k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()})
    return values


def pod_env(docs: list[dict[str, Any]], container: dict[str, Any],
            fields: dict[str, str] | None = None) -> dict[str, str]:
    """The environment Kubernetes would give the container: secretKeyRefs resolved, $(VAR) expanded,
    downward-API fieldRefs (``status.podIP``, ``metadata.name``) taken from ``fields``."""
    env: dict[str, str] = {}
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), e["value"])
        elif "fieldRef" in e["valueFrom"]:
            env[e["name"]] = (fields or {})[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            ref = e["valueFrom"]["secretKeyRef"]
            data = secret_data(docs, ref["name"])
            if ref["key"] in data:
                env[e["name"]] = data[ref["key"]].decode()
            else:
                assert ref.get("optional"), f"{e['name']}: required key {ref['key']} missing"
    return env


def materialize_secret_mounts(docs: list[dict[str, Any]], pod: dict[str, Any], container: dict[str, Any],
                              root: Path) -> dict[str, Path]:
    """Writes the container's Secret volumes under ``root`` as the kubelet would; {mountPath: local dir}."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        secret = volumes[mount["name"]].get("secret")
        rendered = {d["metadata"]["name"] for d in docs if d["kind"] == "Secret"}
        if secret is None or secret["secretName"] not in rendered:
            continue  # not a Secret, or one the operator provides (a CA bundle, existingSecret)
        data = secret_data(docs, secret["secretName"])
        local = root / mount["name"]
        local.mkdir(parents=True, exist_ok=True)
        for item in secret.get("items") or [{"key": k, "path": k} for k in data]:
            assert item["key"] in data or secret.get("optional"), f"Secret key {item['key']} missing"
            (local / item["path"]).write_bytes(data[item["key"]])
        mounts[mount["mountPath"]] = local
    return mounts


def localize_paths(config_text: str, mounts: dict[str, Path]) -> str:
    """The rendered config with mounted paths pointing at the materialized copies."""
    for mount_path, local in mounts.items():
        config_text = config_text.replace(mount_path.rstrip("/") + "/", str(local) + "/")
    return config_text


def render_chart(values: dict[str, Any], tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    """`helm template` with ``values`` passed as a YAML file (no --set parsing of hostile strings)."""
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values, allow_unicode=True), encoding="utf-8")
    out = run(tool("helm"), "template", "rel", str(CHART), "--namespace", "ns", "-f", str(values_file), *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def pod_settings(docs: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The txnwatch Settings the Deployment's container would load: ConfigMap, env and Secret files."""
    from txnwatch.core.config import load_settings

    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {})]
    (deploy,) = [d for d in docs if d["kind"] == "Deployment"]
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mounts = materialize_secret_mounts(docs, pod, container, tmp_path / "mounts")
    config = tmp_path / "config.yaml"
    config.write_text(localize_paths(cm["data"]["config.yaml"], mounts), encoding="utf-8")
    import os

    for key in [k for k in os.environ if k.startswith("TXNWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in pod_env(docs, container).items():
        if key != "TXNWATCH_CONFIG":
            monkeypatch.setenv(key, value)
    return load_settings(config)
