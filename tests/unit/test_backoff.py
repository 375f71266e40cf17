"""One backoff for the poll loop and the outbox: the delay doubles from the base up to the cap."""

from __future__ import annotations

import random

import pytest

from txnwatch.alerting.outbox import OUTBOX_BACKOFF
from txnwatch.collect.poll_loop import POLL_BACKOFF
from txnwatch.core.backoff import Backoff


@pytest.mark.parametrize(("failures", "ceiling"), [
    pytest.param(0, 5.0, id="no-failure-yet-waits-the-base"),
    pytest.param(1, 5.0, id="first-failure"),
    pytest.param(2, 10.0, id="doubles"),
    pytest.param(4, 40.0, id="doubles-again"),
    pytest.param(7, 300.0, id="capped"),
    pytest.param(60, 300.0, id="no-overflow-far-out"),
])
def test_poll_backoff_doubles_to_five_minutes(failures: int, ceiling: float) -> None:
    assert POLL_BACKOFF.ceiling(failures) == ceiling
    assert POLL_BACKOFF.delay(failures) == ceiling  # without an rng: the ceiling itself


def test_jittered_delays_stay_in_the_upper_half_and_spread() -> None:
    rng = random.Random(3)
    draws = [OUTBOX_BACKOFF.delay(3, rng) for _ in range(200)]
    assert all(4.0 <= d <= 8.0 for d in draws)  # 2 s base: the third failure's ceiling is 8 s
    assert max(draws) - min(draws) > 2.0


def test_outbox_backoff_caps_at_ten_minutes() -> None:
    assert OUTBOX_BACKOFF.ceiling(30) == 600.0 and Backoff(1, 8).ceiling(10) == 8
