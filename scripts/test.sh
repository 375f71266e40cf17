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
.venv/bin/python -m pytest -p no:cacheprovider "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "error: pytest collected no tests (exit 5); the suite must not pass empty" >&2
fi
exit $status
