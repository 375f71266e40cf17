"""A group's position against a pinned LSO betrays its isolation level (issue 27 item 1)."""

from __future__ import annotations

import pytest

from txnwatch.core import lso_position as position


@pytest.mark.parametrize(("committed", "lso", "hwm", "expected"), [
    pytest.param(1284, 30, 1290, position.LsoPosition.PAST_LSO, id="read-uncommitted-far-past-the-lso-is-not-stuck"),
    pytest.param(31, 30, 1290, position.LsoPosition.PAST_LSO, id="one-past-the-lso-is-already-read-uncommitted"),
    pytest.param(30, 30, 1290, position.LsoPosition.AT_LSO, id="at-a-pinned-lso-with-records-beyond-is-stuck"),
    pytest.param(30, 30, 30, position.LsoPosition.BEFORE_LSO, id="at-the-end-with-nothing-open-is-caught-up"),
    pytest.param(30, 30, None, position.LsoPosition.BEFORE_LSO, id="unknown-hwm-never-claims-stuck"),
    pytest.param(10, 30, 1290, position.LsoPosition.BEFORE_LSO, id="records-left-before-the-lso"),
    pytest.param(10, None, 1290, None, id="unknown-lso"),
])
def test_lso_position_follows_the_groups_isolation_and_position(committed: int, lso: int | None, hwm: int | None,
                                                                 expected: position.LsoPosition | None) -> None:
    assert position.lso_position(committed, lso, hwm) == expected
    assert position.isolation_from_position(expected) == ("read_uncommitted" if expected == "past_lso" else None)
