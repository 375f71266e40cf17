#!/usr/bin/env bash
# Runs the whole pytest suite.  Any non-zero pytest exit fails, including 5 ("no tests collected").
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
status=0
.venv/bin/python -m pytest -p no:cacheprovider "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "error: pytest collected no tests (exit 5); the suite must not pass empty" >&2
fi
exit $status
