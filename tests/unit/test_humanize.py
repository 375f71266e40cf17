from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core import humanize


@pytest.mark.parametrize(("seconds", "text"), [
    pytest.param(0, "0 s", id="zero"),
    pytest.param(59.6, "1 min", id="rounds-up-to-a-minute"),
    pytest.param(80, "1 min 20 s", id="minutes-and-seconds"),
    pytest.param(3 * 3600 + 7, "3 h 7 s", id="skips-empty-units"),
    pytest.param(2 * 86400 + 5 * 3600 + 59, "2 d 5 h", id="two-units-at-most"),
    pytest.param(-5, "0 s", id="clock-skew-is-not-negative"),
    pytest.param(None, "—", id="unknown"),
])
def test_duration(seconds: float | None, text: str) -> None:
    assert humanize.duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_duration_never_shows_more_than_two_units(seconds: int) -> None:
    assert 1 <= len(humanize.duration(seconds).split()) // 2 <= 2


def test_timestamp_and_ago() -> None:
    at = datetime(2026, 11, 23, 16, 40, 5, tzinfo=UTC)
    assert humanize.timestamp(at) == "2026-11-23 16:40:05 UTC"
    assert humanize.ago(at, at + timedelta(seconds=80)) == "1 min 20 s ago"


def test_find_hanging_table_fits_the_terminal_and_loses_nothing() -> None:
    from txnwatch.cli.hanging import render_table

    result = {"cluster": "c", "max_transaction_timeout_ms": 900_000, "undetermined": [], "hanging": [
        {"topic": "orders-with-a-rather-long-topic-name", "partition": 3, "producer_id": 123456, "producer_epoch": 3,
         "coordinator_epoch": 7, "start_offset": 420, "last_timestamp_ms": 1_763_900_000_000,
         "duration_minutes": 1, "transactional_id": "orders-app-0_0-a-long-transactional-id",
         "reason": "partition_not_listed"}]}
    narrow = render_table(result, now_ms=1_763_900_080_000, width=80)
    assert max(len(line) for line in narrow.splitlines()) <= 80 and "…" not in narrow  # folded, never cut off
    wide = render_table(result, now_ms=1_763_900_080_000, width=250)
    for value in ("orders-with-a-rather-long-topic-name", "orders-app-0_0-a-long-transactional-id", "1 min 20 s",
                  "2025-11-23 12:13:20 UTC", "Start offset"):
        assert value in wide, value
    assert render_table({**result, "hanging": []}).startswith("no hanging transaction on c")
