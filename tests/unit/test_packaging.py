"""Packaging promises: one version everywhere, distinct exit codes, and a daemon that imports only what it runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from importlib.metadata import version as installed_version
from pathlib import Path

import pytest
import yaml

import txnwatch
from txnwatch.core import exitcodes

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION = txnwatch.__version__  # the one source: pyproject.toml reads it, the chart repeats it


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)


def _semver(text: str) -> tuple[int, int, int]:
    major, minor, patch = (int(part) for part in text.split("."))
    return major, minor, patch


def test_one_version_everywhere() -> None:
    """The wheel, `txnwatch --version`, the image tag and label, and the chart's version and appVersion."""
    chart = yaml.safe_load((ROOT / "helm/txnwatch/Chart.yaml").read_text())
    assert re.fullmatch(r"\d+\.\d+\.\d+", VERSION), VERSION
    # The wheel's version is read from txnwatch.__version__ (the editable install's metadata was built the same way).
    assert PYPROJECT["project"]["dynamic"] == ["version"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "txnwatch.__version__"}
    assert installed_version("txnwatch") == VERSION, "reinstall: scripts/bootstrap.sh"
    # The chart's image tag defaults to appVersion: the chart runs the image built from this version.
    assert chart["appVersion"] == VERSION and chart["version"] == VERSION
    image = subprocess.run(["bash", str(ROOT / "scripts" / "build-image.sh"), "--name"], capture_output=True,
                           text=True, timeout=60, check=True,
                           env={k: v for k, v in os.environ.items()
                                if k not in {"TXNWATCH_IMAGE", "TXNWATCH_IMAGE_TARGET"}}).stdout.strip()
    assert image == f"ghcr.io/txnwatch/txnwatch:{VERSION}"
    # The image's version label is the build argument scripts/build-image.sh passes (tests/deploy/test_image.py
    # reads it off a built image).
    assert re.search(r"^ARG VERSION\b", (ROOT / "Dockerfile").read_text(), re.M)


def test_the_version_is_released_or_the_next_one() -> None:
    """Between releases the version is the one being prepared: never behind the CHANGELOG's newest release, and
    either released there or above it with an [Unreleased] section (scripts/release.sh refuses to build it until
    the CHANGELOG has its section, docs/releasing.md)."""
    changelog = (ROOT / "CHANGELOG.md").read_text()
    released = [_semver(v) for v in re.findall(r"^## \[(\d+\.\d+\.\d+)\]", changelog, re.M)]
    assert released, "CHANGELOG.md names no release"
    if _semver(VERSION) not in released:
        assert _semver(VERSION) > max(released) and "## [Unreleased]" in changelog, (VERSION, max(released))


def test_version_flag() -> None:
    result = subprocess.run([sys.executable, "-m", "txnwatch", "--version"], capture_output=True, text=True,
                            timeout=60, cwd=ROOT)
    assert (result.returncode, result.stdout.strip()) == (0, f"txnwatch {VERSION}")


def test_exit_codes_are_distinct_and_documented() -> None:
    codes = exitcodes.ALL
    assert len(set(codes.values())) == len(codes), codes
    readme = (ROOT / "README.md").read_text()
    for value in codes.values():
        assert f"| {value} |" in readme, f"exit code {value} is not in README.md's table"


def test_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert PYPROJECT["project"]["license"] == "Apache-2.0"
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text


def test_heavy_extras_are_extras() -> None:
    core = " ".join(PYPROJECT["project"]["dependencies"])
    extras = PYPROJECT["project"]["optional-dependencies"]
    assert "pyspark" not in core and "pyarrow" not in core
    assert any(d.startswith("pyspark") for d in extras["pipeline"])
    assert any(d.startswith("pyarrow") for d in extras["archive"])
    assert "lab" in extras


# What the daemon loads: `txnwatch run` resolved through the CLI, then everything the daemon builds from.
DAEMON_IMPORTS = """
import json, sys
from txnwatch.cli import commands as cli
cli.app(["run", "--help"], standalone_mode=False)
import txnwatch.supervise.daemon, txnwatch.runtime.wiring, txnwatch.runtime.lifecycle, txnwatch.serve.app, txnwatch.collect.poll_loop
print(json.dumps(sorted(sys.modules)))
"""


def test_the_daemon_imports_neither_the_lab_nor_the_pipeline() -> None:
    result = _python(DAEMON_IMPORTS)
    assert result.returncode == 0, result.stderr
    modules = set(json.loads(result.stdout.strip().splitlines()[-1]))
    assert "txnwatch.supervise.daemon" in modules  # the probe did load the daemon
    unwanted = sorted(m for m in modules if m.split(".")[0] in ("pyspark", "pyarrow", "py4j")
                      or m.startswith(("txnwatch.lab", "txnwatch.pipeline")))
    assert unwanted == []


# The app as the daemon builds it, then one console page: jinja2 and markdown-it come with the page, not before.
CONSOLE_IMPORTS = """
import json, sys
from fastapi.testclient import TestClient
from txnwatch.core.config import load_settings
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app
settings = load_settings(None, database_url="sqlite://", clusters=[{"name": "a", "bootstrap_servers": ["h:9092"]}])
app = create_app(build_runtime(settings, collect=False), manage_lifecycle=False)
before = sorted(m for m in sys.modules if m.split(".")[0] in ("jinja2", "markdown_it"))
TestClient(app).get("/console/login")
after = sorted(m for m in sys.modules if m.split(".")[0] in ("jinja2", "markdown_it"))
print(json.dumps([before, "jinja2" in after]))
"""


def test_the_console_loads_its_template_engine_on_its_first_page() -> None:
    """Issue 25, idle RSS: a daemon nobody opens the console of never imports jinja2 or markdown-it."""
    result = _python(CONSOLE_IMPORTS)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [[], True]


# The daemon as `txnwatch run` builds it (the entry point's parse, runtime, alerting, the front), on defaults, then
# with a pager configured.  serve() is replaced by the part of it that builds the daemon, without the server.
DAEMON_BUILD_IMPORTS = """
import json, sys
import txnwatch.supervise.daemon as daemon
from txnwatch.core.config import load_settings
from txnwatch.runtime.wiring import build_runtime
from txnwatch.alerting.service import Alerting
built = []
def build(settings):
    from txnwatch.serve.front import daemon_app
    built.append(build_runtime(settings, collect=False))
    daemon_app(built[0])
daemon.serve = build
sys.argv = ["txnwatch", "run", "--config", CONFIG]
from txnwatch.cli.main import main
main()
import txnwatch.store.recorder, txnwatch.store.txnlog, txnwatch.collect.txnlog_writer  # what the polls and the tail write with
loaded = {name.split(".")[0] for name, module in sys.modules.items() if module is not None}  # httpx._main: None
unwanted = sorted(loaded & {"httpx", "httpcore", "alembic", "mako", "typer", "click", "rich", "fastapi", "starlette"})
unwanted += sorted(name for name in sys.modules if name.startswith("sqlalchemy.dialects.postgresql"))
paged = load_settings(None, database_url="sqlite://", clusters=[{"name": "a", "bootstrap_servers": ["h:9092"]}],
                      pagerduty={"enabled": True, "routing_key": "k" * 32})
channels = Alerting.from_settings(paged, built[0].sessions)._channels
print(json.dumps([unwanted, list(channels), "httpx" in sys.modules]))
"""


def test_txnwatch_run_loads_no_http_client_command_line_library_or_api_stack(tmp_path: Path) -> None:
    """Issue 25, idle RSS: httpx (~4.5 MB resident) comes with the first notifier or broker exporter scrape;
    Alembic and Mako stay in the schema check's child process; typer, click and rich parse every command line
    but a plain `txnwatch run` (txnwatch.cli.main); FastAPI and starlette (~11 MB with the API built) come with
    the first request other than a probe (txnwatch.serve.front); SQLAlchemy's PostgreSQL dialect (~2.3 MB) only
    with a PostgreSQL database (store.upsert, store.partial_index)."""
    config = tmp_path / "txnwatch.yaml"
    config.write_text(yaml.safe_dump({"database_url": "sqlite://",
                                      "clusters": [{"name": "a", "bootstrap_servers": ["h:9092"]}]}))
    result = _python(DAEMON_BUILD_IMPORTS.replace("CONFIG", repr(str(config))))
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [[], ["pagerduty"], True]


def test_a_missing_extra_is_named_with_its_install_command() -> None:
    # sys.modules[name] = None blocks the import as if the package were not installed.
    result = _python("import sys; sys.modules['pyspark'] = None\n"
                     "from txnwatch.cli.main import main; sys.argv = ['txnwatch', 'pipeline', 'run', '--no-db']; main()")
    assert result.returncode == exitcodes.MISSING_DEPENDENCY, result.stderr
    assert "pip install 'txnwatch[pipeline]'" in result.stderr and "Traceback" not in result.stderr


def test_without_pyarrow_the_archive_is_said_once_and_nothing_is_purged(monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture,
                                                                        tmp_path: Path) -> None:
    """`make run` installs no archive extra while the demo (and the default config) name an archive_dir: the
    daemon says once what is missing and what that means, starts no child that could only fail, and the
    transaction pages read no archive."""
    from txnwatch.core.config import load_settings
    from txnwatch.store import archive_job, txnlog_queries

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if not installed
    monkeypatch.setattr(archive_job, "_said_unavailable", [False])
    monkeypatch.setattr(archive_job.subprocess, "run", lambda *a, **k: pytest.fail("a child without pyarrow"))
    monkeypatch.setattr(archive_job.subprocess, "Popen", lambda *a, **k: pytest.fail("a child without pyarrow"))
    settings = load_settings(None, database_url="sqlite://", clusters=[{"name": "a", "bootstrap_servers": ["h:9092"]}],
                             retention={"archive_dir": str(tmp_path / "archive")})
    with caplog.at_level("WARNING", logger=archive_job.log.name):
        assert archive_job.say_if_unavailable(settings)
        assert archive_job.run_in_child("history", settings) is False
        assert archive_job.run_in_child("transitions", settings) is False
    said = [r.getMessage() for r in caplog.records if r.name == archive_job.log.name]
    assert len(said) == 1, said
    assert "pip install 'txnwatch[archive]'" in said[0] and "nothing is purged" in said[0]
    assert str(tmp_path / "archive") in said[0]
    assert txnlog_queries.archived_transitions(str(tmp_path / "archive"), "a", "id") == []
