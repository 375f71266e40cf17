#!/usr/bin/env bash
# The static gates: ruff (lint + import order) and mypy (strict for core/model.py, detect/, kafka/; the default
# elsewhere). Configuration lives in pyproject.toml. Exits non-zero on any finding. Run by scripts/test.sh (make test).
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
echo "==> ruff check"
.venv/bin/ruff check --no-cache . || status=1
echo "==> mypy"
.venv/bin/mypy || status=1
exit $status
