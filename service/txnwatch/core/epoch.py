"""Epoch milliseconds ↔ aware UTC datetimes, in one place.

Kafka and ``detect/`` count time in epoch milliseconds (an injected ``now_ms``); the store, the API
and the console speak timezone-aware UTC datetimes. Every crossing goes through these two
functions, so a rounding or a time zone cannot differ between the row written and the row read.
``to_ms`` rounds to the nearest millisecond: a datetime read back from a database holds
microseconds, and truncating 999.9995 ms would lose one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import overload


def to_ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


@overload
def from_ms(ms: int | float) -> datetime: ...
@overload
def from_ms(ms: None) -> None: ...
@overload
def from_ms(ms: int | float | None) -> datetime | None: ...
def from_ms(ms: int | float | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC)


def from_kafka_ms(ms: int | None) -> datetime | None:
    """A Kafka timestamp, where -1 (any negative value) means "none" (a producer that never wrote, ...)."""
    return None if ms is None or ms < 0 else from_ms(ms)
