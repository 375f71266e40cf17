"""From database rows to the data of response models."""

from __future__ import annotations

from datetime import datetime
from functools import cache
from typing import Any

from pydantic import BaseModel


@cache
def _field_names(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(model.model_fields)


def from_row(model: type[BaseModel], row: object, **computed: Any) -> dict[str, Any]:
    """The fields of ``model`` taken from a row's columns (a Core row, a dataclass or an ORM object), or
    from ``computed`` for those it lacks; plain data for :func:`params.json_response`.

    A Core row is read in one C-level pass (``zip`` of its keys and values): ``getattr`` per field on a
    Row goes through SQLAlchemy's Python key lookup, a sixth of the CPU of a 100-item page."""
    keys = getattr(row, "_fields", None)
    if keys is not None:
        values = dict(zip(keys, row, strict=True))  # type: ignore[call-overload]
        data = {name: values[name] for name in _field_names(model) if name not in computed}
    else:
        data = {name: getattr(row, name) for name in _field_names(model) if name not in computed}
    return {**data, **computed}


def seconds_between(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())


def gap(hwm: int | None, lso: int | None) -> int | None:
    """HWM − LSO: what read_committed consumers cannot see yet."""
    return None if hwm is None or lso is None else max(0, hwm - lso)
