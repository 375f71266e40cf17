#!/usr/bin/env bash
# The static gates (ruff, mypy: scripts/lint.sh) and then the whole pytest suite.  Any finding fails the run
# before a test starts; any non-zero pytest exit fails, including 5 ("no tests collected").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
if ! bash scripts/lint.sh; then
  echo "error: ruff or mypy reported findings (see above); fix them before the suite runs" >&2
  exit 1
fi
status=0
# --durations: the slowest tests at the end, to keep the whole suite within CI's 25 minutes (docs/contributing.md).
# The whole suite runs in TEST_WORKERS pytest-xdist workers (2, CI's cores; 0: one process), each test of a shared
# session service (the 3-broker lab, Spark, the browser, the KDC, the Kafka 4 broker) on the one worker that starts
# it (tests/fixtures/lanes.py: xdist_group): most of a lab test's time is waiting, which the other worker fills.
# A caller's own -n (the fast lane's) wins.
workers=()
if [[ " $* " != *" -n "* ]]; then
  n=${TEST_WORKERS:-2}
  if [[ $n != 0 ]]; then workers=(-n "$n" --dist loadgroup); fi
fi
.venv/bin/python -m pytest -p no:cacheprovider --durations=20 "${workers[@]}" "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "error: pytest collected no tests (exit 5); the suite must not pass empty" >&2
fi
# What the run cost, to compare runs on a shared machine: the wall time alone says more about the load than about
# the suite. CPU is that of lint and pytest and the processes they waited for (xdist workers included); `times`
# runs in this shell, not in a $(...) subshell, which would report zero.
cpu_file=$(mktemp)
times >"$cpu_file"
echo "==> lint + tests: ${SECONDS} s wall, CPU user/sys $(tail -1 "$cpu_file" | tr ' ' /), load average $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f "$cpu_file"
exit $status
