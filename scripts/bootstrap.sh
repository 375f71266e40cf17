#!/usr/bin/env bash
# Installs what txnwatch needs on a fresh Debian machine, idempotently and quickly when done already.
#   scripts/bootstrap.sh                what `make run` needs: venv + package (the daemon's dependencies, no
#                                       extra), Java 17, Maven (Kafka lab jars), the console's assets
#   scripts/bootstrap.sh --test-python  plus the Python packages the suite imports (`make test-fast`)
#   scripts/bootstrap.sh --test         plus the test machine: PostgreSQL server, promtool, helm, podman,
#                                       debootstrap, chromium, more Kafka lines,
#                                       an MIT KDC and the kerberos extra (`make test`)
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=false want_test_python=false
case "${1:-}" in
  --test) want_test=true want_test_python=true ;;
  --test-python) want_test_python=true ;;
  "") ;;
  *) echo "usage: scripts/bootstrap.sh [--test-python | --test]" >&2; exit 2 ;;
esac
# The extras of pyproject.toml each installs.  `make run` (the daemon, the lab, the demo): none beyond the
# daemon's dependencies ("lab" names that, empty).  The suite: its tools (test), PySpark (pipeline) and pyarrow
# (archive).  A command that needs a missing extra says which (txnwatch.core.extras).
run_extras=lab
test_extras=test,pipeline,archive,lab
extras=$run_extras
$want_test_python && extras=$test_extras

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
need_root() {
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then echo sudo; else
      echo "error: installing $1 needs root (apt-get); run as root or install it yourself" >&2; exit 1; fi
  fi
}

apt_updated=false
apt_install() {
  local sudo; sudo=$(need_root "$*")
  if ! $apt_updated; then
    say "apt-get update"
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    apt_updated=true
  fi
  say "apt-get install $*"
  # policy-rc.d keeps Debian's postinst scripts from starting services (postgresql, prometheus) we do not want running.
  local policy=/usr/sbin/policy-rc.d created_policy=false
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' | $sudo tee $policy >/dev/null; $sudo chmod +x $policy; created_policy=true; fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  if $created_policy; then $sudo rm -f $policy; fi
}

java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }

# Java 17+ (PySpark, Kafka lab) and Maven (fetches the lab's Kafka jars).
if ! command -v java >/dev/null || [[ "$(java_major)" -lt 17 ]]; then apt_install openjdk-17-jre-headless; fi
if ! command -v mvn >/dev/null; then apt_install maven; fi

# Python virtualenv with txnwatch installed editable, at the versions in constraints.txt (those the suite
# passed with, not whatever is newest); reinstalled only when pyproject.toml or constraints.txt changes.
PY=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  if ! $PY -m venv --help >/dev/null 2>&1 || ! $PY -c 'import ensurepip' 2>/dev/null; then apt_install python3-venv; fi
  say "creating .venv"
  $PY -m venv .venv
fi
# The stamp covers the C sources of the tail's compiled parts (setup.py) too: an editable install builds them in place.
# Without a C compiler or Python's headers pip installs txnwatch without it (the same records, slower), so both
# are installed here (Debian's gcc and python3-dev, where the interpreter is Debian's own).
if ! command -v cc >/dev/null; then apt_install gcc libc6-dev; fi
if [[ ! -e "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]]; then
  apt_install python3-dev
fi
# The stamp file names the extras installed under its hash (the version's source is in it: the package's
# metadata follows it): a `make run` after `make test` finds its extras there and removes nothing; a `make test`
# after `make run` adds the missing ones; after a change of the hash the extras the .venv held are installed
# again, at the new pins, with those asked for.
stamp=".venv/.txnwatch-installed-$(cat pyproject.toml constraints.txt setup.py service/txnwatch/__init__.py \
  service/txnwatch/kafka/_txnlog_walk.c service/txnwatch/store/_stream_params.c | sha1sum | cut -c1-12)"
extras_set() { tr ', ' '\n\n' <<<"$*" | sed '/^$/d' | sort -u | paste -sd, -; }
have=$(extras_set "$(cat "$stamp" 2>/dev/null || true)")
union=$(extras_set "$(cat .venv/.txnwatch-installed-* 2>/dev/null || true),$extras")
if [[ ! -e $stamp || $union != "$have" ]]; then
  say "installing Python dependencies into .venv: txnwatch[$union] (the first time takes a minute or more)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e ".[$union]"
  rm -f .venv/.txnwatch-installed-*
  echo "$union" > "$stamp"
fi

# The console's browser assets (ECharts, Swagger UI, ReDoc): pinned npm packages, hash-checked, unpacked into
# service/txnwatch/serve/console/static/vendor/ (gitignored, shipped in the wheel). npm is needed only to fetch them.
if ! .venv/bin/python -c 'import sys; from txnwatch.serve.console import assets; sys.exit(not assets.present())' 2>/dev/null; then
  if ! command -v npm >/dev/null; then apt_install npm; fi
  say "fetching the console's assets (npm pack of ECharts, Swagger UI, ReDoc)"
  .venv/bin/python -m txnwatch.serve.console.assets
fi
.venv/bin/python -c 'from txnwatch.serve.console.assets import copy_runbooks; copy_runbooks()'

# Kafka jars for the lab, resolved with Maven into a cache outside the repo.
.venv/bin/python -c 'from txnwatch.lab.jars import resolve_kafka_jars; resolve_kafka_jars()' >&2

if $want_test; then
  if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then apt_install postgresql; fi
  if ! command -v runuser >/dev/null; then apt_install util-linux; fi
  # Debian's chromium for the console's browser tests (Playwright drives it; no browser download).
  if ! command -v chromium >/dev/null; then apt_install chromium; fi
  bash scripts/install-promtool.sh
  # The Kafka lines the end-to-end tests cover (3.9, the default, the newest; its tools from the release that
  # ships them) and the JMX exporter agent their brokers run: cached once per machine, like the default.
  .venv/bin/python -c 'from txnwatch.lab.jars import (OLDER_KAFKA_VERSION, NEWEST_KAFKA_VERSION, resolve_kafka_jars,
    resolve_tools_jars, resolve_jmx_exporter)
for v in (OLDER_KAFKA_VERSION, NEWEST_KAFKA_VERSION):
    resolve_kafka_jars(v); resolve_tools_jars(v)
resolve_jmx_exporter()' >&2
  bash scripts/install-helm.sh .venv/bin
  # The container image test (tests/deploy/test_image.py): podman builds, debootstrap makes the base.
  if ! command -v podman >/dev/null || ! command -v buildah >/dev/null || ! command -v debootstrap >/dev/null; then
    apt_install podman buildah debootstrap
  fi
  # Kerberos (tests/kafka/test_kerberos.py): Debian's MIT KDC, its admin tool and kinit for tests/fixtures/kdc.py,
  # and the kerberos extra (gssapi, which PyPI ships for Linux as source only: it builds against libkrb5-dev).
  for tool in /usr/sbin/krb5kdc /usr/sbin/kadmin.local /usr/bin/kinit /usr/bin/krb5-config; do
    if [[ ! -x $tool ]]; then apt_install krb5-kdc krb5-admin-server krb5-user libkrb5-dev; break; fi
  done
  if ! .venv/bin/python -c 'import gssapi' 2>/dev/null; then
    say "installing the kerberos extra (gssapi builds from source: a few minutes the first time)"
    .venv/bin/python -m pip install -q -c constraints.txt -e ".[$test_extras,kerberos]"
  fi
fi
