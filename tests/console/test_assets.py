"""The vendored browser assets: pinned by hash, only the listed files, offline patches that must apply."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from txnwatch.serve.console import assets


def _tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_extract_checks_the_hash_copies_the_listed_files_and_patches(tmp_path: Path) -> None:
    tgz = _tarball({"dist/lib.js": b'x={src:"https://cdn.example/logo.svg"}', "LICENSE": b"MIT", "other.js": b"no"})
    asset = assets.NpmAsset("lib", "1.0.0", assets.sri(tgz), (("dist/lib.js", "lib.js"), ("LICENSE", "lib.LICENSE")),
                            (("lib.js", '"https://cdn.example/logo.svg"', '"data:,"'),))
    assets.extract(asset, tgz, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lib.LICENSE", "lib.js"]
    assert (tmp_path / "lib.js").read_text() == 'x={src:"data:,"}'


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    tgz = _tarball({"lib.js": b"evil"})
    asset = assets.NpmAsset("lib", "1.0.0", assets.sri(b"something else"), (("lib.js", "lib.js"),))
    with pytest.raises(SystemExit, match="not the pinned"):
        assets.extract(asset, tgz, tmp_path)
    assert not (tmp_path / "lib.js").exists()


def test_a_patch_that_no_longer_matches_fails_loudly(tmp_path: Path) -> None:
    tgz = _tarball({"lib.js": b"nothing to patch"})
    asset = assets.NpmAsset("lib", "1.0.0", assets.sri(tgz), (("lib.js", "lib.js"),), (("lib.js", "cdn", "x"),))
    with pytest.raises(SystemExit, match="matches 0 times"):
        assets.extract(asset, tgz, tmp_path)


def test_the_installed_assets_are_the_pinned_ones() -> None:
    assert assets.present(), "run scripts/bootstrap.sh (fetches the console's npm assets)"
    js = (assets.VENDOR / "redoc.standalone.js").read_text(encoding="utf-8")
    assert "cdn.redoc.ly/redoc/logo-mini.svg" not in js
