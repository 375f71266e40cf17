"""The one crossing between epoch milliseconds (Kafka, detect/) and aware UTC datetimes (store, API, console)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core.epoch import from_kafka_ms, from_ms, to_ms


@pytest.mark.parametrize(("ms", "at"), [
    pytest.param(0, datetime(1970, 1, 1, tzinfo=UTC), id="epoch"),
    pytest.param(1_764_115_205_123, datetime(2025, 11, 26, 0, 0, 5, 123_000, tzinfo=UTC), id="millis-kept"),
])
def test_both_ways(ms: int, at: datetime) -> None:
    assert from_ms(ms) == at and from_ms(ms).tzinfo is UTC and to_ms(at) == ms


def test_to_ms_rounds_what_a_database_gives_back() -> None:
    """999.9995 ms stored as microseconds reads back as 1 s, not 999 ms."""
    assert to_ms(datetime(2026, 1, 1, 0, 0, 0, 999_999, tzinfo=UTC)) == to_ms(datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC))


def test_to_ms_honours_other_zones() -> None:
    assert to_ms(datetime(1970, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))) == 0


@pytest.mark.parametrize(("ms", "expected"), [
    pytest.param(None, None, id="none"),
    pytest.param(-1, None, id="kafka-minus-one-is-none"),
    pytest.param(0, datetime(1970, 1, 1, tzinfo=UTC), id="zero-is-a-time"),
])
def test_kafka_timestamps(ms: int | None, expected: datetime | None) -> None:
    assert from_kafka_ms(ms) == expected


def test_none_stays_none() -> None:
    assert from_ms(None) is None


@given(st.integers(min_value=0, max_value=4_102_444_800_000))  # up to 2100
def test_round_trip(ms: int) -> None:
    assert to_ms(from_ms(ms)) == ms
