"""The console's third-party browser assets: pinned npm packages, unpacked into the package's static folder.

Nothing here is committed (static/vendor/ is gitignored): scripts/bootstrap.sh runs
``python -m txnwatch.serve.console.assets``, which asks npm for each pinned tarball (``npm pack``,
so npm's own registry settings apply), checks it against the pinned SRI hash, and copies
out only the files the daemon serves, with their licenses.  A wheel built afterwards
carries them (package-data).  The daemon never downloads anything: without the files the
console says how to get them and /docs falls back to a plain link to the OpenAPI JSON.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

VENDOR = Path(__file__).resolve().parent / "static" / "vendor"


@dataclass(frozen=True, slots=True)
class NpmAsset:
    package: str
    version: str
    integrity: str  # npm's SRI string of the tarball (sha512-<base64>), as `npm view PKG@VER dist.integrity` shows
    files: tuple[tuple[str, str], ...]  # (path inside the tarball under package/, name in static/vendor/)
    # (name in static/vendor/, exact text, replacement): each must match exactly once, or fetching fails.
    offline_patches: tuple[tuple[str, str, str], ...] = ()


# ECharts: time axes, step lines and marked areas/lines (stall episodes, fences) by configuration alone;
# the "common" build (0.7 MB) has every component the console uses.
ASSETS: tuple[NpmAsset, ...] = (
    NpmAsset("echarts", "6.1.0",
             "sha512-q0yaFPggC9FUdsWH4blavRWFmxdrIodbkoKNAjJudAI6CA9gNPxHtV2RcZNEepZVlk4yvBYkOkbk6HIVpIyHZA==",
             (("dist/echarts.common.min.js", "echarts.min.js"), ("LICENSE", "echarts.LICENSE"),
              ("NOTICE", "echarts.NOTICE"))),
    NpmAsset("swagger-ui-dist", "5.35.0",
             "sha512-U06rpMtW9V3XPGOBeamTUSr0Z09jMX4IJuANpE/EZbAhw0G8CgwrzU4YmXkn/h0wCDNsXdGarTNNHC3sU8yVUQ==",
             (("swagger-ui-bundle.js", "swagger-ui-bundle.js"), ("swagger-ui.css", "swagger-ui.css"),
              ("favicon-32x32.png", "favicon-32x32.png"), ("LICENSE", "swagger-ui.LICENSE"),
              ("NOTICE", "swagger-ui.NOTICE"))),
    # 2.x: 3.x's standalone bundle uses import.meta and no longer loads as the classic script FastAPI's page uses.
    NpmAsset("redoc", "2.5.4",
             "sha512-M6jWhG1qoBnH6TFmzJnstyCZ87HmOY/UzDm78mHiYihEdlV/YcS9ogOo1NlElnJMeLsyxHFe2yFc4sNjHTrABQ==",
             (("bundles/redoc.standalone.js", "redoc.standalone.js"), ("LICENSE", "redoc.LICENSE")),
             # Its side menu always shows Redocly's logo from their CDN (no option turns it off): an empty
             # inline image instead, so /redoc makes no request beyond the daemon.
             (("redoc.standalone.js", 'src:"https://cdn.redoc.ly/redoc/logo-mini.svg"',
               'src:"data:image/svg+xml,%3Csvg xmlns=%27http://www.w3.org/2000/svg%27/%3E"'),)),
)
STAMP = VENDOR / "assets.json"


def _manifest() -> list[dict[str, str | int]]:
    return [{"package": a.package, "version": a.version, "integrity": a.integrity,
             "patches": len(a.offline_patches)} for a in ASSETS]


def present(vendor: Path = VENDOR) -> bool:
    """All pinned files are there, from the pinned versions."""
    stamp = vendor / STAMP.name
    try:
        if json.loads(stamp.read_text()) != _manifest():
            return False
    except (OSError, ValueError):
        return False
    return all((vendor / name).is_file() for a in ASSETS for _, name in a.files)


def sri(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _npm_pack(asset: NpmAsset, into: Path) -> bytes:
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("npm is needed once to fetch the console's assets: apt-get install npm "
                         "(scripts/bootstrap.sh does it)")
    spec = f"{asset.package}@{asset.version}"
    result = subprocess.run([npm, "pack", spec, "--json", "--pack-destination", str(into)], capture_output=True,
                            text=True, timeout=600, check=False)
    if result.returncode != 0:
        raise SystemExit(f"npm pack {spec} failed: {result.stderr.strip()[-500:]}")
    filename = json.loads(result.stdout)[0]["filename"]
    return (into / filename).read_bytes()


def extract(asset: NpmAsset, tarball: bytes, vendor: Path) -> None:
    """Check the tarball against the pinned hash, then copy out the pinned files."""
    got = sri(tarball)
    if got != asset.integrity:
        raise SystemExit(f"{asset.package}@{asset.version}: tarball hash {got} is not the pinned {asset.integrity}")
    vendor.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as tar:
        for inside, name in asset.files:
            member = tar.extractfile(f"package/{inside}")
            if member is None:
                raise SystemExit(f"{asset.package}@{asset.version} has no {inside}")
            (vendor / name).write_bytes(member.read())
    for name, old, new in asset.offline_patches:
        text = (vendor / name).read_text(encoding="utf-8")
        if text.count(old) != 1:
            raise SystemExit(f"{asset.package}@{asset.version}: offline patch of {name} matches "
                             f"{text.count(old)} times, not once")
        (vendor / name).write_text(text.replace(old, new), encoding="utf-8")


def ensure(vendor: Path = VENDOR) -> bool:
    """Fetch what is missing; True if anything was fetched."""
    if present(vendor):
        return False
    with tempfile.TemporaryDirectory(prefix="txnwatch-assets-") as tmp:
        for asset in ASSETS:
            extract(asset, _npm_pack(asset, Path(tmp)), vendor)
    (vendor / STAMP.name).write_text(json.dumps(_manifest(), indent=1) + "\n")
    return True


def copy_runbooks(vendor: Path = VENDOR) -> None:
    """An installed wheel has no docs/: keep a copy of the runbooks for /console/runbooks."""
    source = Path(__file__).resolve().parents[4] / "docs" / "runbooks.md"
    if source.is_file():
        vendor.mkdir(parents=True, exist_ok=True)
        (vendor / "runbooks.md").write_bytes(source.read_bytes())


if __name__ == "__main__":
    fetched = ensure()
    copy_runbooks()
    print(f"console assets {'fetched into' if fetched else 'already in'} {VENDOR}", file=sys.stderr)
