"""The container image: built from the repository's Dockerfile with podman, then proven by running it.

`podman run` is refused in the sandboxes this suite runs in (rlimits, cgroups), so the image's root
filesystem is exported and run with `chroot` the way a container runtime would (tests/deploy/imagekit.py):
its own Env, User and WorkingDir from the image config, the root mounted read-only (as the chart's
readOnlyRootFilesystem), a writable state directory at /var/lib/txnwatch, uid 10001. It runs
`txnwatch --version`, `migrate` and a short `run` that polls the session's lab cluster until /readyz says
ready, then stops on SIGTERM. The pipeline target is tests/deploy/test_pipeline_image.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import txnwatch
from tests.deploy.imagekit import STATE_DIR, Image, build_and_export, chroot_command, state_dir
from tests.deploy.tools import CHART, run, tool
from tests.fixtures.daemon import free_port, wait_for

# The module's image is built (debootstrap, wheels, podman's vfs commit) and exported in the first test's setup,
# which pytest-timeout counts: on a loaded machine that alone can pass the suite's 600 s (build_and_export allows
# the build itself 1,800 s).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]

VERSION = txnwatch.__version__  # the one source (tests/unit/test_packaging.py)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    built = build_and_export(tmp_path_factory.mktemp("image-root"))
    print(f"image {built.name} ready in {built.build_seconds:.0f}s, {built.size_bytes / 1e6:.0f} MB")
    yield built
    shutil.rmtree(built.root, ignore_errors=True)


@pytest.fixture
def state(tmp_path: Path, image: Image) -> Path:
    """The volume the chart mounts at /var/lib/txnwatch, owned by the image's user."""
    return state_dir(tmp_path / "state", image)


def test_image_is_named_for_the_version_and_the_chart_runs_it(image: Image) -> None:
    assert image.name == f"ghcr.io/txnwatch/txnwatch:{VERSION}"
    assert image.config["Labels"]["org.opencontainers.image.version"] == VERSION
    rendered = run(tool("helm"), "template", "t", str(CHART)).stdout
    images = {c["image"] for doc in yaml.safe_load_all(rendered) if doc and doc.get("kind") == "Deployment"
              for c in doc["spec"]["template"]["spec"]["containers"] + doc["spec"]["template"]["spec"].get(
                  "initContainers", [])}
    assert images == {image.name}


def test_image_is_slim_non_root_and_holds_the_daemon_only(image: Image) -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert image.config["User"] == f"{values['podSecurityContext']['runAsUser']}:{values['podSecurityContext']['runAsGroup']}"
    assert image.config["Entrypoint"] == ["txnwatch"] and image.config["WorkingDir"] == STATE_DIR
    site = next((image.root / "opt" / "txnwatch" / "lib").glob("python3*/site-packages"))
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"txnwatch", "fastapi", "sqlalchemy", "alembic", "kafka_python", "pyarrow"} <= installed
    assert not installed & {"pyspark", "py4j", "pip", "setuptools", "pytest"}, installed
    assert (image.root / "opt" / "txnwatch" / "share" / "alembic" / "versions").is_dir()
    # Bytecode is compiled at build time: a read-only root never needs to be written.
    assert list((site / "txnwatch").glob("__pycache__/*.pyc"))
    venv_mb = sum(f.stat().st_size for f in (image.root / "opt" / "txnwatch").rglob("*") if f.is_file()) / 2**20
    root_mb = sum(f.stat().st_size for f in image.root.rglob("*") if f.is_file() and not f.is_symlink()) / 2**20
    print(f"image root {root_mb:.0f} MB, venv {venv_mb:.0f} MB (pyarrow for the archive included)")


def test_the_images_python_loads_the_compiled_parts(image: Image, state: Path) -> None:
    """The tail's compiled batch walk and stream-row parameters (setup.py) are in the image's txnwatch wheel and
    load with the image's own Python: were they missing, the tail would spend more CPU a record and say so only in
    a log."""
    code = ("from txnwatch.kafka import txnlog_batches as b; from txnwatch.store import txnlog as s; "
            "print(b.WALK_MISSING, s.STREAM_PARAMS_MISSING)")
    check = subprocess.run(chroot_command(image, state, "-c", code, entrypoint=["/opt/txnwatch/bin/python"]),
                           capture_output=True, text=True, timeout=120)
    assert (check.returncode, check.stdout.strip()) == (0, "None None"), check.stdout + check.stderr


def test_version_migrate_and_run_inside_the_image(image: Image, state: Path, lab_cluster: Any, tmp_path: Path) -> None:
    version = subprocess.run(chroot_command(image, state, "--version"), capture_output=True, text=True, timeout=120)
    assert (version.returncode, version.stdout.strip()) == (0, f"txnwatch {VERSION}"), version.stderr

    db_env = {"TXNWATCH_DATABASE_URL": f"sqlite:///{STATE_DIR}/txnwatch.db",
              "TXNWATCH_RETENTION__ARCHIVE_DIR": f"{STATE_DIR}/archive"}
    migrated = subprocess.run(chroot_command(image, state, "migrate", env=db_env), capture_output=True, text=True,
                              timeout=300)
    assert migrated.returncode == 0, migrated.stderr
    assert "database at revision" in migrated.stdout and (state / "txnwatch.db").exists()

    port = free_port()
    clusters = [{"name": "lab", "bootstrap_servers": lab_cluster.bootstrap_servers}]
    env = {**db_env, "TXNWATCH_CLUSTERS": json.dumps(clusters), "TXNWATCH_API__HOST": "127.0.0.1",
           "TXNWATCH_API__PORT": str(port), "TXNWATCH_POLL_INTERVAL_SECONDS": "2"}
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(chroot_command(image, state, "run", env=env), stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        def ready() -> Any:
            assert proc.poll() is None, f"txnwatch run exited {proc.returncode}:\n{log.read_text()[-3000:]}"
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5)
            except httpx.HTTPError:
                return None
            return response.json() if response.status_code == 200 else None

        body = wait_for(ready, 180, what="txnwatch run in the image to poll the lab cluster and report ready")
        assert body["status"] == "ready"
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
        assert 'cluster="lab"' in metrics
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait(timeout=30)
    # uvicorn re-raises SIGTERM after its graceful shutdown, so the status is the signal's.
    assert code in (0, -signal.SIGTERM) and "Application shutdown complete" in log.read_text(), log.read_text()[-3000:]
    written = {p.name for p in state.iterdir()}
    assert "txnwatch.db" in written
