"""Where a consumer group stands against a pinned partition's LSO, and what that says of its isolation level.

Shared by the API, the console and the CLI (core/, so every room may read it); pure.
"""

from __future__ import annotations

from enum import StrEnum


class LsoPosition(StrEnum):
    """Where a group's committed offset stands against a pinned partition's LSO.

    Kafka never reports a group's isolation level (OffsetFetch and DescribeGroups carry no
    such field), but its position betrays it: a read_committed consumer never fetches past
    the LSO, so a committed offset beyond it can only come from a read_uncommitted group,
    which the open transaction does not hold up at all.
    """

    PAST_LSO = "past_lso"  # read_uncommitted: reads the open transaction's records, not held up
    AT_LSO = "at_lso"  # a read_committed group receives nothing here until the transaction ends
    BEFORE_LSO = "before_lso"  # committed records left to read before it reaches the LSO


def lso_position(committed: int, lso: int | None, hwm: int | None) -> LsoPosition | None:
    """The group's position against the LSO; None when the LSO is unknown.

    At the LSO means stuck only while records lie beyond it (HWM > LSO): a group at the
    end of a partition with nothing open is simply caught up, and is reported before the
    LSO (no record left) rather than stuck.
    """
    if lso is None:
        return None
    if committed > lso:
        return LsoPosition.PAST_LSO
    if committed == lso and hwm is not None and hwm > lso:
        return LsoPosition.AT_LSO
    return LsoPosition.BEFORE_LSO


def isolation_from_position(position: LsoPosition | None) -> str | None:
    """``read_uncommitted`` when the position proves it, else None (Kafka does not say)."""
    return "read_uncommitted" if position is LsoPosition.PAST_LSO else None
