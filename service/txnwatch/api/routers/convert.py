"""From database rows to the data of response models."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel


def from_row(model: type[BaseModel], row: object, **computed: Any) -> dict[str, Any]:
    """The fields of ``model`` taken from a row's columns, or from ``computed`` for those it lacks;
    plain data for :func:`params.json_response` to validate in one pass."""
    data = {name: getattr(row, name) for name in model.model_fields if name not in computed}
    return {**data, **computed}


def seconds_between(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())


def gap(hwm: int | None, lso: int | None) -> int | None:
    """HWM − LSO: what read_committed consumers cannot see yet."""
    return None if hwm is None or lso is None else max(0, hwm - lso)
