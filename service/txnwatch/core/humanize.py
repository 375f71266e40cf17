"""Times as people read them, for the console and the CLI: "3 min 20 s ago", "2026-11-23 16:40:05 UTC"."""

from __future__ import annotations

from datetime import UTC, datetime


def duration(seconds: float | None) -> str:
    """Two units at most: precise enough to act on, short enough to read at 3 a.m."""
    if seconds is None:
        return "—"
    s = max(0, round(seconds))
    days, rest = divmod(s, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [(days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")]
    shown = [f"{n} {unit}" for n, unit in parts if n][:2]
    return " ".join(shown) if shown else "0 s"


def timestamp(at: datetime | None) -> str:
    if at is None:
        return "—"
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(at: datetime | None, now: datetime) -> str:
    if at is None:
        return "—"
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return f"{duration((now - at).total_seconds())} ago"
