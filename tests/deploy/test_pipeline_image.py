"""The pipeline image (Dockerfile target `pipeline`): built without a registry, then made to compute rollups.

`TXNWATCH_IMAGE_TARGET=pipeline scripts/build-image.sh` builds it from a debootstrap base that holds Debian's
openjdk-17-jre-headless. The test runs it under chroot as the chart's CronJob would (tests/deploy/imagekit.py:
read-only root, uid 10001, HOME and SPARK_LOCAL_DIRS on a tmpfs /tmp, the state volume at /var/lib/txnwatch):
Java and PySpark inside, then the CronJob exactly as the chart renders it (its args, environment and the
ConfigMap's config file) on a small synthesised archive: export, rollups, database load; and again with a
`spark://` master, the image being the driver of a standalone cluster. The rollups must equal the ones this
machine's own venv computes from the same archive.

Opt-in: building a 1.1 GB image under podman's vfs driver and running Spark in it costs minutes
(docs/container.md has the figures), more than the default suite's budget allows. Run it with
TXNWATCH_IMAGE_TESTS=all; the default suite keeps the fast checks (tests/deploy/test_helm_pipeline.py:
the chart's pipeline image, its arguments through the real CLI parser, the Dockerfile target).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

import txnwatch
from tests.deploy.imagekit import Image, build_and_export, chroot_command, state_dir, tree_mb
from tests.deploy.tools import VENV_BIN, pod_env, render_chart
from tests.pipeline.rollup_rows import rollup_rows, same_value
from tests.pipeline.test_standalone import standalone  # noqa: F401  # the Spark master + worker fixture
from txnwatch.lab.ports import free_ports
from txnwatch.pipeline.synth import synthesize

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("TXNWATCH_IMAGE_TESTS") != "all",
                       reason="builds the 1.1 GB pipeline image (minutes under vfs): set TXNWATCH_IMAGE_TESTS=all"),
]

VERSION = txnwatch.__version__  # the one source (tests/unit/test_packaging.py)
UNTIL = date(2026, 11, 20)
DAYS = 2
ROWS = 3_000  # small: the point is that the image runs the job, not the volume (benchmarks/pipeline.py)
SPARK = ["--master", "local[2]", "--driver-memory", "512m", "--conf", "spark.sql.shuffle.partitions=4"]
WINDOW = ["--since", (UNTIL - timedelta(days=DAYS - 1)).isoformat(), "--until", UNTIL.isoformat()]
CHART_ENV = {"HOME": "/tmp", "SPARK_LOCAL_DIRS": "/tmp"}  # as the CronJob sets them


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Image]:
    built = build_and_export(tmp_path_factory.mktemp("pipeline-image-root"), target="pipeline")
    print(f"\npipeline image {built.name}: scripts/build-image.sh {built.build_seconds:.0f}s, "
          f"{built.size_bytes / 1e6:.0f} MB (podman), root {tree_mb(built.root):.0f} MiB")
    yield built
    shutil.rmtree(built.root, ignore_errors=True)


def _in_image(image: Image, state: Path, *args: str, entrypoint: list[str] | None = None,
              env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(chroot_command(image, state, *args, env=CHART_ENV | (env or {}), entrypoint=entrypoint),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def test_pipeline_image_is_named_for_the_chart_and_holds_spark_and_java(image: Image, tmp_path: Path) -> None:
    assert image.name == f"ghcr.io/txnwatch/txnwatch:{VERSION}-pipeline"
    assert image.config["User"] == "10001:10001" and image.config["Entrypoint"] == ["txnwatch"]
    site = next((image.root / "opt" / "txnwatch" / "lib").glob("python3*/site-packages"))
    installed = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"txnwatch", "pyspark", "py4j", "pyarrow", "sqlalchemy"} <= installed
    assert not installed & {"pip", "setuptools", "pytest"}, installed
    state = state_dir(tmp_path / "state", image)
    java = _in_image(image, state, "-version", entrypoint=["java"])
    assert java.returncode == 0 and re.search(r'version "17\.', java.stderr), java.stderr
    probe = ("import pyspark, txnwatch.pipeline.session as s; s.check_java(); print(pyspark.__version__)")
    imported = _in_image(image, state, "-c", probe, entrypoint=["python"])
    host_pyspark = subprocess.run([str(VENV_BIN / "python"), "-c", "import pyspark; print(pyspark.__version__)"],
                                  capture_output=True, text=True, check=True).stdout.strip()
    assert (imported.returncode, imported.stdout.strip()) == (0, host_pyspark), imported.stderr


def _chart_job(tmp_path: Path, **pipeline: Any) -> tuple[dict[str, Any], dict[str, str], Path]:
    """The chart's CronJob container (args expanded), its environment and its config file, as Kubernetes
    would hand them to the pod: default values plus a small Spark and a fixed window (or ``pipeline``)."""
    values = {"archive": {"existingClaim": "txnwatch-archive"},
              "pipeline": {"enabled": True, "extraArgs": WINDOW,
                           "spark": {"master": "local[2]", "driverMemory": "512m",
                                     "conf": {"spark.sql.shuffle.partitions": "4"}}} | pipeline}
    docs = render_chart(values, tmp_path)
    (cron,) = [d for d in docs if d["kind"] == "CronJob"]
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d["data"]]
    config = tmp_path / "config.yaml"
    config.write_text(cm["data"]["config.yaml"])
    config.chmod(0o644)
    env = pod_env(docs, container, {"status.podIP": "127.0.0.1", "metadata.name": "txnwatch-pipeline-test"})
    args = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in container["args"]]
    return container | {"args": args}, env, config


@dataclass(frozen=True)
class Reference:
    archive: Path  # a synthesised archive (random content): tests run on copies of it
    rollups: Path  # what this machine's venv computes from it, locally
    rows: int


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Reference:
    """One archive and its rollups by the host's own venv, shared by the tests (one host Spark run, not two)."""
    root = tmp_path_factory.mktemp("reference")
    archive, rollups = root / "archive", root / "rollups"
    written = synthesize(str(archive), rows=ROWS, days=DAYS, clusters=2, until=UNTIL)
    started = time.monotonic()
    host = subprocess.run([sys.executable, "-m", "txnwatch.pipeline", "run", "--no-db", "--no-export",
                           "--archive", str(archive), "--output", str(rollups), *WINDOW, *SPARK],
                          capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
                          env=os.environ | {"SPARK_LOCAL_IP": "127.0.0.1"})
    assert host.returncode == 0, host.stderr[-4000:]
    print(f"\nreference: {sum(written.values()):,} rows, host venv's local run {time.monotonic() - started:.0f}s")
    return Reference(archive, rollups, sum(written.values()))


def _copy_archive(reference: Reference, to: Path, image: Image) -> None:
    """The reference archive at ``to``, owned by the pod's user (the chart's fsGroup on the archive volume)."""
    shutil.copytree(reference.archive, to)
    uid, _, gid = image.config["User"].partition(":")
    for item in [to, *to.rglob("*")]:
        os.chown(item, int(uid), int(gid))


def _assert_same_rollups(got_root: Path, want_root: Path, loaded: dict[str, int] | None = None) -> None:
    from txnwatch.store.rollups import MODELS

    for name in MODELS:
        got, want = rollup_rows(got_root / name), rollup_rows(want_root / name)
        assert want, f"{name}: the host computed nothing to compare"
        assert len(got) == len(want), (name, len(got), len(want))
        if loaded is not None:
            assert loaded[name] == len(want), (name, loaded[name], len(want))
        for g, w in zip(got, want, strict=True):
            assert g.keys() == w.keys() and all(same_value(g[k], w[k]) for k in w), (name, g, w)


def test_the_charts_job_runs_the_rollups_in_the_image_like_the_host(image: Image, reference: Reference,
                                                                     tmp_path: Path) -> None:
    """The CronJob exactly as the chart renders it (args, environment, ConfigMap at /etc/txnwatch/config.yaml)
    in the pipeline image: export, Spark rollups, database load; the rollups equal the host venv's."""
    from sqlalchemy import create_engine, func, select

    from txnwatch.store.rollups import MODELS

    container, env, config = _chart_job(tmp_path)
    assert container["image"] == image.name
    state = state_dir(tmp_path / "state", image)
    archive = state / "archive"  # the archive PVC's mount point under the state volume
    _copy_archive(reference, archive, image)
    files = {"/etc/txnwatch/config.yaml": config}
    migrated = subprocess.run(chroot_command(image, state, "migrate", env=env, files=files), capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL)
    assert migrated.returncode == 0, migrated.stderr[-3000:]  # the daemon pod's init container, on SQLite

    started = time.monotonic()
    ran = subprocess.run(chroot_command(image, state, *container["args"], env=env, files=files),
                         capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    image_s = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr[-4000:]
    for stage in ("exporting new history", "starting Spark (local[2])", "loading rollups into the database"):
        assert stage in ran.stderr, (stage, ran.stderr[-2000:])
    print(f"\npipeline run on {reference.rows:,} rows: the chart's job in the image {image_s:.0f}s")

    engine = create_engine(f"sqlite:///{state / 'txnwatch.db'}")
    try:
        with engine.connect() as connection:
            loaded = {name: connection.execute(select(func.count()).select_from(model)).scalar_one()
                      for name, model in MODELS.items()}
    finally:
        engine.dispose()
    _assert_same_rollups(archive / "_rollups", reference.rollups, loaded)


def test_the_charts_job_drives_a_spark_standalone_cluster(image: Image, reference: Reference, standalone: str,
                                                          tmp_path: Path) -> None:
    """pipeline.spark.master spark://…: the image's txnwatch is the driver (client mode) of a Spark cluster
    whose executors run elsewhere (here: PySpark's own master and worker on this machine, the same Spark
    version) and connect back on the chart's driver host and fixed ports. The executors are given a Python
    that does not exist: the rollups must need none of theirs (DataFrames only, no Python UDFs)."""
    driver_port, block_port = free_ports(2)
    shared = tmp_path / "shared-archive"  # the same path for the driver (in the image) and the executors
    container, env, config = _chart_job(
        tmp_path, extraArgs=[*WINDOW, "--archive", str(shared), "--no-export", "--no-db"],
        spark={"master": standalone, "driverMemory": "512m", "driverPort": driver_port,
               "blockManagerPort": block_port,
               "conf": {"spark.executor.memory": "512m", "spark.cores.max": "1",
                        "spark.sql.shuffle.partitions": "4", "spark.pyspark.python": "/nonexistent/python3"}})
    args = container["args"]
    assert "spark.driver.host=127.0.0.1" in args and f"spark.driver.port={driver_port}" in args
    _copy_archive(reference, shared, image)
    state = state_dir(tmp_path / "state", image)
    started = time.monotonic()
    ran = subprocess.run(chroot_command(image, state, *args, env=env, files={"/etc/txnwatch/config.yaml": config},
                                        volumes={str(shared): shared}),
                         capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL)
    image_s = time.monotonic() - started
    assert ran.returncode == 0, ran.stderr[-4000:]
    assert f"starting Spark ({standalone})" in ran.stderr, ran.stderr[-2000:]
    print(f"\npipeline run on {reference.rows:,} rows: the image as a standalone cluster's driver {image_s:.0f}s")
    _assert_same_rollups(shared / "_rollups", reference.rollups)
