#!/usr/bin/env bash
# Builds one release's artefacts into dist/ and publishes nothing (docs/releasing.md says how to cut a release):
#   dist/txnwatch-<version>-<python>-<abi>-<platform>.whl   the wheel: this checkout, its C modules compiled for this
#                                                           machine's Python, the console's assets inside
#   dist/txnwatch-<version>.tgz                             the Helm chart (helm package)
#   dist/txnwatch-<version>-image.tar                       the daemon's image (scripts/build-image.sh), an OCI archive
#   dist/SHA256SUMS                                         their checksums (check: cd dist && sha256sum -c SHA256SUMS)
#
#   scripts/release.sh [--draft] [--no-image]
#     --draft     build although CHANGELOG.md has no section for this version or the tree has uncommitted changes
#                 (artefacts to look at, not a release)
#     --no-image  leave the image out (it needs root, podman and debootstrap; an image scripts/build-image.sh
#                 built from the same inputs before is reused, otherwise it takes minutes)
#   DIST=<dir>    where the artefacts go (default dist/); emptied first
#
# Refuses, before building anything, when the chart's version or appVersion is not txnwatch.__version__.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m==> [%3ds] %s\033[0m\n' "$SECONDS" "$*" >&2; }
die() { echo "release: $*" >&2; exit 1; }

draft=false with_image=true
for arg in "$@"; do
  case $arg in
    --draft) draft=true ;;
    --no-image) with_image=false ;;
    *) echo "usage: scripts/release.sh [--draft] [--no-image]" >&2; exit 2 ;;
  esac
done
py=.venv/bin/python
[[ -x $py ]] || die "no .venv: run scripts/bootstrap.sh --test first (the package, helm, podman)"
helm=$(command -v helm || echo .venv/bin/helm)
[[ -x $helm ]] || die "no helm: run scripts/bootstrap.sh --test (it installs helm into .venv/bin)"

# One version everywhere (tests/unit/test_packaging.py holds the same).
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' service/txnwatch/__init__.py | head -1)
chart_field() { sed -n "s/^$1: *\"\{0,1\}\([^\"]*\)\"\{0,1\} *$/\1/p" helm/txnwatch/Chart.yaml | head -1; }
[[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "txnwatch.__version__ '$version' is not MAJOR.MINOR.PATCH"
for field in version appVersion; do
  [[ $(chart_field $field) == "$version" ]] \
    || die "helm/txnwatch/Chart.yaml $field is '$(chart_field $field)', txnwatch.__version__ is '$version': set both"
done
if ! grep -Eq "^## \[$version\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$" CHANGELOG.md; then
  $draft || die "CHANGELOG.md has no '## [$version] - YYYY-MM-DD' section: cut it first (docs/releasing.md), or --draft"
  say "draft: CHANGELOG.md has no section for $version yet"
fi
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then
  $draft || die "uncommitted changes: a release is built from what its tag names (commit, or --draft)"
  say "draft: built from a tree with uncommitted changes"
fi
"$py" -c 'import sys; from txnwatch.serve.console import assets; sys.exit(not assets.present())' \
  || die "the console's assets are missing: run scripts/bootstrap.sh (the wheel carries them)"
"$py" -c 'from txnwatch.serve.console.assets import copy_runbooks; copy_runbooks()'

dist=${DIST:-dist}
rm -rf "$dist" && mkdir -p "$dist"

say "wheel txnwatch $version"
"$py" -m pip wheel -q --no-deps -w "$dist" . >&2
rm -rf build/lib build/bdist.* 2>/dev/null || true
wheel=$(ls "$dist"/txnwatch-"$version"-*.whl)
"$py" - "$wheel" "$version" <<'EOF' || die "the wheel is not what a release needs"
import sys, zipfile
wheel, version = sys.argv[1:]
names = zipfile.ZipFile(wheel).namelist()
metadata = zipfile.ZipFile(wheel).read(f"txnwatch-{version}.dist-info/METADATA").decode()
assert f"\nVersion: {version}\n" in metadata, "its metadata names another version"
assert "txnwatch/serve/console/static/vendor/echarts.min.js" in names, "it lacks the console's assets"
assert any(n.startswith("txnwatch/kafka/_txnlog_walk.") and n.endswith(".so") for n in names), "it lacks the compiled walk"
EOF

say "chart txnwatch $version"
"$helm" package helm/txnwatch -d "$dist" >/dev/null

if $with_image; then
  say "image (scripts/build-image.sh; reused when its inputs are unchanged)"
  env -u TXNWATCH_IMAGE TXNWATCH_IMAGE_TARGET=daemon bash scripts/build-image.sh --save "$dist/txnwatch-$version-image.tar" >/dev/null
fi

(cd "$dist" && sha256sum -- * > .SHA256SUMS && mv .SHA256SUMS SHA256SUMS)
say "release $version in $dist/ ($SECONDS s):"
(cd "$dist" && ls -l --block-size=K -- * >&2)
