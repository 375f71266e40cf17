#!/usr/bin/env bash
# Installs what txnwatch needs on a fresh Debian machine, idempotently and quickly when done already.
#   scripts/bootstrap.sh          run-time needs: venv + package, Java 17, Maven (Kafka lab jars)
#   scripts/bootstrap.sh --test   plus test needs: PostgreSQL server, promtool, helm, podman, debootstrap
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=false
[[ "${1:-}" == "--test" ]] && want_test=true

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
stamp=".venv/.txnwatch-installed-$(cat pyproject.toml constraints.txt setup.py service/txnwatch/kafka/_txnlog_walk.c \
  service/txnwatch/store/_stream_params.c | sha1sum | cut -c1-12)"
if [[ ! -e $stamp ]]; then
  say "installing Python dependencies into .venv (first time takes a minute or two)"
  .venv/bin/python -m pip install -q --upgrade pip
  .venv/bin/python -m pip install -q -c constraints.txt -e '.[test,pipeline,archive,lab]'
  rm -f .venv/.txnwatch-installed-*
  touch "$stamp"
fi

# The console's browser assets (ECharts, Swagger UI, ReDoc): pinned npm packages, hash-checked, unpacked into
# service/txnwatch/serve/console/static/vendor/ (gitignored, shipped in the wheel). npm is needed only to fetch them.
if ! .venv/bin/python -c 'import sys; from txnwatch.serve.console import assets; sys.exit(not assets.present())' 2>/dev/null; then
  if ! command -v npm >/dev/null; then apt_install npm; fi
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
fi
