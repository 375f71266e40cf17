"""Comparing two runs' rollups (Parquet): rows in a stable order, doubles equal to 1e-9."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow.dataset as ds


def rollup_rows(root: Path) -> list[dict[str, Any]]:
    """One rollup's rows without the partition column, sorted on every non-float column."""
    table = ds.dataset(root, format="parquet", partitioning="hive").to_table()
    rows = [{k: v for k, v in row.items() if k != "date"} for row in table.to_pylist()]
    return sorted(rows, key=lambda r: tuple(str(r[k]) for k in sorted(r) if not isinstance(r[k], float)))


def same_value(a: Any, b: Any) -> bool:
    """Sums of doubles may be added in another order (another executor, another machine): equal to 1e-9,
    else exactly."""
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) or (math.isnan(a) and math.isnan(b))
    return bool(a == b)
