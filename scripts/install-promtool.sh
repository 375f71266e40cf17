#!/usr/bin/env bash
# Installs promtool (Debian package `prometheus`) if it is missing, without leaving a
# Prometheus server running: a policy-rc.d denies service starts during the install, and the
# unit is stopped and disabled in case something started it anyway.  Idempotent, quiet on success.
set -euo pipefail

die() { echo "install-promtool: $*" >&2; exit 1; }

command -v promtool >/dev/null 2>&1 && exit 0

[[ $(id -u) -eq 0 ]] || die "promtool is missing and installing it needs root: sudo apt-get install -y prometheus"
command -v apt-get >/dev/null || die "promtool is missing and this is not a Debian/Ubuntu machine; install Prometheus' promtool"

policy=/usr/sbin/policy-rc.d
created_policy=0
if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && created_policy=1
fi
cleanup() { if [[ $created_policy -eq 1 ]]; then rm -f "$policy"; fi; }
trap cleanup EXIT

log="$(mktemp)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -q --no-install-recommends prometheus >"$log" 2>&1; then
    apt-get update -q >>"$log" 2>&1 || true
    apt-get install -y -q --no-install-recommends prometheus >>"$log" 2>&1 \
        || { tail -20 "$log" >&2; rm -f "$log"; die "apt-get install prometheus failed"; }
fi
rm -f "$log"

if command -v systemctl >/dev/null 2>&1 && [[ -d /run/systemd/system ]]; then
    systemctl stop prometheus >/dev/null 2>&1 || true
    systemctl disable prometheus >/dev/null 2>&1 || true
elif command -v service >/dev/null 2>&1; then
    service prometheus stop >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null 2>&1 || die "prometheus installed but promtool is not on PATH"
