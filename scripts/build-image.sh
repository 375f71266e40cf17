#!/usr/bin/env bash
# Builds txnwatch's container image with podman, without pulling anything from a registry:
#   1. a Debian base (python3, python3-venv) made by debootstrap from Debian's mirror, cached under
#      $TXNWATCH_CACHE/image keyed by its recipe, imported with `podman import`;
#   2. `podman build` of the repository's Dockerfile with that base as the BASE build argument.
# Usage: scripts/build-image.sh [--name | --save FILE]
# Prints the image name (ghcr.io/txnwatch/txnwatch:<txnwatch.__version__>, `-pipeline` appended to the tag for the
# pipeline target) on stdout; progress, the build time and the image size go to stderr.
#
# Settings (environment):
#   TXNWATCH_DEBIAN_MIRROR   Debian mirror for debootstrap. Default: the first Debian mirror in this
#                            machine's apt sources (/etc/apt/sources.list{,.d}), else http://deb.debian.org/debian.
#   TXNWATCH_DEBIAN_SUITE    Debian suite of the base (default bookworm: Python 3.11).
#   TXNWATCH_IMAGE           image name to tag (default ghcr.io/txnwatch/txnwatch:<version>, and
#                            ghcr.io/txnwatch/txnwatch:<version>-pipeline for the pipeline target: the name the
#                            Helm chart's pipeline CronJob runs by default).
#   TXNWATCH_IMAGE_TARGET    Dockerfile target: daemon (default) or pipeline (PySpark and Debian's
#                            openjdk-17-jre-headless, which then goes into the debootstrap base).
#   TXNWATCH_CACHE           cache root (default ~/.cache/txnwatch).
#   PODMAN_STORAGE_ROOT      podman storage used for the build (default $TXNWATCH_CACHE/containers/storage,
#                            vfs driver: works without fuse-overlayfs or kernel overlay support).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { printf '\033[1m==> [%3ds] %s\033[0m\n' "$SECONDS" "$*" >&2; }
die() { echo "build-image: $*" >&2; exit 1; }

version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' service/txnwatch/__init__.py | head -1)  # the one source
[[ -n $version ]] || die "no __version__ in service/txnwatch/__init__.py"
target=${TXNWATCH_IMAGE_TARGET:-daemon}
case $target in
  daemon) image=${TXNWATCH_IMAGE:-ghcr.io/txnwatch/txnwatch:$version} ;;
  pipeline) image=${TXNWATCH_IMAGE:-ghcr.io/txnwatch/txnwatch:$version-pipeline} ;;
  *) echo "build-image: TXNWATCH_IMAGE_TARGET must be daemon or pipeline, not '$target'" >&2; exit 2 ;;
esac
suite=${TXNWATCH_DEBIAN_SUITE:-bookworm}
cache=${TXNWATCH_CACHE:-$HOME/.cache/txnwatch}
storage=${PODMAN_STORAGE_ROOT:-$cache/containers/storage}
runroot=${PODMAN_RUNROOT:-${XDG_RUNTIME_DIR:-/tmp}/txnwatch-podman-$(id -u)}

# `--name`: print the image name this run would build and stop (the chart's tests compare it with the
# chart's default images without building anything).  `--save FILE`: build, then write the image to FILE as an OCI
# archive (`podman load -i FILE` reads it; scripts/release.sh puts it in dist/).
save=''
case ${1:-} in
  --name) echo "$image"; exit 0 ;;
  --save) save=${2:?--save needs a file}; save=$(realpath -m "$save") ;;
  "") ;;
  *) echo "usage: scripts/build-image.sh [--name | --save FILE]" >&2; exit 2 ;;
esac

debian_mirror() {
  # One-line ("deb URI suite ...") and deb822 ("URIs: ...") apt sources; the first that serves Debian's main archive.
  local f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -r $f ]] || continue
    uri=$(sed -n -e 's/^deb \(\[[^]]*\] \)\{0,1\}\([a-z]*:\/\/[^ ]*\) .*/\2/p' -e 's/^URIs: *\([^ ]*\).*/\1/p' "$f" \
          | grep -E '/debian/?$' | head -1) || true
    [[ -n $uri ]] && { echo "${uri%/}"; return; }
  done
  echo "http://deb.debian.org/debian"
}

for tool in podman debootstrap; do
  command -v $tool >/dev/null || die "$tool is not installed (Debian: apt-get install podman buildah debootstrap; scripts/bootstrap.sh --test does it)"
done
[[ $(id -u) -eq 0 ]] || die "debootstrap and podman's vfs storage need root here (or run rootless podman with your own BASE)"
podman=(podman --root "$storage" --runroot "$runroot" --storage-driver vfs)

# One build at a time per cache: two at once share build/image (one's `rm -rf` under the other's copy) and the vfs
# store, where two concurrent commits fail a layer's digest check. A second build waits here, and says so.
mkdir -p "$cache/image"
exec 9>"$cache/image/build.lock"
if ! flock -n 9; then
  say "another image build holds $cache/image/build.lock; waiting for it"
  flock 9
fi

# The base's recipe: what goes in and how it is trimmed. Any change here makes a new cache key. The pipeline's
# base adds Debian's Java 17 runtime (Spark 4 needs 17+); debootstrap resolves its dependencies and runs the
# packages' scripts, so ca-certificates-java builds the JVM's trust store (cacerts) as apt would.
base_packages=python3,python3-venv
[[ $target == pipeline ]] && base_packages=$base_packages,openjdk-17-jre-headless
recipe="suite=$suite variant=minbase include=$base_packages trim=doc,man,locale,apt-lists,debs v1"
key=$(printf '%s' "$recipe" | sha1sum | cut -c1-12)
base_image=localhost/txnwatch-base:$key
base_tar=$cache/image/base-$key.tar

if ! "${podman[@]}" image exists "$base_image"; then
  if [[ ! -s $base_tar ]]; then
    mirror=${TXNWATCH_DEBIAN_MIRROR:-$(debian_mirror)}
    say "debootstrap $suite ($base_packages) from $mirror (once; cached as $base_tar)"
    mkdir -p "$cache/image"
    rootfs=$(mktemp -d "$cache/image/rootfs.XXXXXX")
    trap 'rm -rf "$rootfs"' EXIT
    debootstrap --variant=minbase --include="$base_packages" "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 \
      || { tail -20 "$rootfs.log" >&2; die "debootstrap failed (mirror $mirror; set TXNWATCH_DEBIAN_MIRROR to another)"; }
    rm -f "$rootfs.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* \
           "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/* "$rootfs"/var/log/*
    tar --numeric-owner -C "$rootfs" -cf "$base_tar.tmp" . && mv "$base_tar.tmp" "$base_tar"
    rm -rf "$rootfs"; trap - EXIT
  fi
  say "podman import $base_tar as $base_image"
  "${podman[@]}" import --quiet "$base_tar" "$base_image" >/dev/null
fi

# Inputs of the image: if an image with this name already carries the same inputs label, it is current.
inputs=$( { echo "$target $base_image"; cat Dockerfile .containerignore pyproject.toml constraints.txt alembic.ini "$0";
            find service alembic -type f ! -name '*.pyc' ! -path '*/__pycache__/*' ! -path '*.egg-info/*' -print0 \
              | sort -z | xargs -0 sha1sum; } | sha1sum | cut -c1-16)
saved() {  # the last step of both ways out: the archive --save asked for, then the name on stdout
  if [[ -n $save ]]; then
    say "podman save $image as $save"
    rm -f "$save"; "${podman[@]}" save --quiet --format oci-archive -o "$save" "$image"
  fi
  echo "$image"
}
if [[ "$("${podman[@]}" image inspect --format '{{ index .Labels "io.txnwatch.inputs" }}' "$image" 2>/dev/null)" == "$inputs" ]]; then
  say "$image is current (inputs $inputs), size $(( $("${podman[@]}" image inspect --format '{{ .Size }}' "$image") / 1000000 )) MB"
  saved; exit 0
fi

# Wheels, fetched here with this machine's pip (its index, proxy and CA settings), so the build itself stays
# offline. Dependency wheels are cached by requirements + constraints; txnwatch's own wheel is built fresh
# from the working tree (static files vendored by bootstrap included).
py=${PYTHON:-python3}
[[ -x .venv/bin/python ]] && py=.venv/bin/python
extras=archive
[[ $target == pipeline ]] && extras=archive,pipeline
requirements=$("$py" -c 'import sys, tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + [d for e in sys.argv[1].split(",") for d in p["optional-dependencies"][e]]))' "$extras")
platform=(--only-binary=:all: --python-version 3.11 --implementation cp --abi cp311 --abi abi3 --abi none
          --platform manylinux_2_36_x86_64 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
          --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform any)
wheel_key=$( (printf '%s\n' "$requirements" "${platform[*]}"; cat constraints.txt) | sha1sum | cut -c1-12)
wheels=$cache/image/wheels-$wheel_key
if [[ ! -e $wheels/.complete ]]; then
  say "pip download of the image's dependency wheels into $wheels"
  rm -rf "$wheels"; mkdir -p "$wheels"
  printf '%s\n' "$requirements" > "$wheels/requirements.txt"
  # PySpark is published as a source distribution only: it cannot come through the platform-pinned download.
  # Its wheel is pure Python (py2.py3-none-any), so the host's pip builds it (its wheel cache makes that quick
  # after the first time) and py4j, its one dependency, joins the download.
  grep -v '^pyspark' "$wheels/requirements.txt" > "$wheels/binary.txt"
  if grep -q '^pyspark' "$wheels/requirements.txt"; then echo py4j >> "$wheels/binary.txt"; fi
  "$py" -m pip download -q "${platform[@]}" -c constraints.txt -r "$wheels/binary.txt" -d "$wheels"
  if grep -q '^pyspark' "$wheels/requirements.txt"; then
    say "pip wheel of PySpark (an sdist on PyPI; pure Python)"
    "$py" -m pip wheel -q --no-deps -c constraints.txt "$(grep '^pyspark' "$wheels/requirements.txt")" -w "$wheels"
  fi
  touch "$wheels/.complete"
fi
rm -rf build/image && mkdir -p build/image/deps build/image/app build/image/pipeline
cp -l "$wheels"/*.whl build/image/deps/ 2>/dev/null || cp "$wheels"/*.whl build/image/deps/
if [[ $target == pipeline ]]; then mv build/image/deps/pyspark-* build/image/deps/py4j-* build/image/pipeline/; fi
"$py" -m pip wheel -q --no-deps --no-build-isolation -w build/image/app . >/dev/null 2>&1 \
  || "$py" -m pip wheel -q --no-deps -w build/image/app .
rm -rf build/lib build/bdist.* 2>/dev/null || true

say "podman build $image (target $target, base $base_image)"
build_started=$SECONDS
# --layers=false: with the vfs driver every cached layer is a full copy of the root; one commit per stage is
# much quicker, and the inputs label above already skips a build that would change nothing.
"${podman[@]}" build --quiet --isolation chroot --layers=false --label io.txnwatch.inputs="$inputs" \
  --build-arg BASE="$base_image" --build-arg VERSION="$version" --target "$target" -t "$image" -f Dockerfile . >/dev/null
# The image this one replaced is now untagged: drop it (with vfs every image is a full copy).
"${podman[@]}" image prune -f >/dev/null || true
size_bytes=$("${podman[@]}" image inspect --format '{{ .Size }}' "$image")
say "built $image in $((SECONDS - build_started))s (podman build; ${SECONDS}s with base and wheels), size $((size_bytes / 1000000)) MB"
saved
