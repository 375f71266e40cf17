"""FailureStreak: one line per state change and a reminder, tracebacks only for txnwatch's own bugs."""

from __future__ import annotations

import logging

import pytest

from txnwatch.core.logbudget import FailureStreak


def test_a_streak_logs_start_change_reminder_and_recovery(caplog: pytest.LogCaptureFixture) -> None:
    clock = [0.0]
    streak = FailureStreak(logging.getLogger("t"), "thing", reminder_s=300, clock=lambda: clock[0])
    caplog.set_level(logging.INFO)
    for second in range(600):  # ten minutes of the same failure, one per second
        clock[0] = float(second)
        streak.failed(ConnectionRefusedError("refused"))
    streak.failed(TimeoutError("slow"))
    streak.ok()
    streak.ok()
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["thing failing: ConnectionRefusedError: refused",
                        "thing still failing after 300s (301 failures): ConnectionRefusedError: refused",
                        "thing still failing, now: TimeoutError: slow",
                        "thing recovered after 599s (601 failures)"]
    assert not any(r.exc_info for r in caplog.records)


def test_an_unexpected_exception_gets_one_traceback_per_streak(caplog: pytest.LogCaptureFixture) -> None:
    streak = FailureStreak(logging.getLogger("t"), "thing")
    for _ in range(5):
        streak.failed(KeyError("bug"))
    assert [bool(r.exc_info) for r in caplog.records] == [True]
