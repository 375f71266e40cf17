"""scripts/release.sh: the wheel and the packaged chart of one version in dist/, with checksums that verify.

The image part (`scripts/build-image.sh --save`) is left out here (`--no-image`): tests/deploy/test_image.py
builds and proves the image, and the release reuses an image built from the same inputs (docs/releasing.md)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest
import yaml

import txnwatch
from tests.deploy.tools import ROOT, tool

pytestmark = pytest.mark.slow
VERSION = txnwatch.__version__


def test_release_builds_the_wheel_and_the_chart_of_one_version_with_checksums(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    env = os.environ | {"DIST": str(dist), "PATH": f"{Path(tool('helm')).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "release.sh"), "--draft", "--no-image"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = dist.glob(f"txnwatch-{VERSION}-*.whl")
    chart = dist / f"txnwatch-{VERSION}.tgz"
    with zipfile.ZipFile(wheel) as z:
        assert f"\nVersion: {VERSION}\n" in z.read(f"txnwatch-{VERSION}.dist-info/METADATA").decode()
        assert "txnwatch/serve/console/static/vendor/echarts.min.js" in z.namelist()
    with tarfile.open(chart) as t:
        member = t.extractfile("txnwatch/Chart.yaml")
        assert member is not None
        packaged = yaml.safe_load(member.read())
    assert (packaged["version"], packaged["appVersion"]) == (VERSION, VERSION)
    sums: dict[str, str] = {}
    for line in (dist / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        sums[name] = digest
    assert sorted(sums) == sorted([wheel.name, chart.name])
    for name, digest in sums.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name
