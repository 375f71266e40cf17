"""From ORM rows to response models."""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from txnwatch.api.schemas import HangingEpisodeOut, LsoStallOut
from txnwatch.store import models as m

M = TypeVar("M", bound=BaseModel)


def from_row(model: type[M], row: object, **computed: Any) -> M:
    """Copy the columns a response model shares with a row; fields the row lacks come from ``computed``."""
    data = {name: getattr(row, name) for name in model.model_fields if name not in computed}
    return model.model_validate({**data, **computed})


def seconds_between(start: datetime, end: datetime) -> float:
    return max(0.0, (end - start).total_seconds())


def gap(hwm: int | None, lso: int | None) -> int | None:
    """HWM − LSO: what read_committed consumers cannot see yet."""
    return None if hwm is None or lso is None else max(0, hwm - lso)


def hanging_out(episode: m.HangingEpisode, cluster: str, now: datetime) -> HangingEpisodeOut:
    return from_row(HangingEpisodeOut, episode, cluster=cluster,
                    open_seconds=seconds_between(episode.first_seen_at, episode.resolved_at or now))


def lso_stall_out(episode: m.LsoStallEpisode, cluster: str, now: datetime) -> LsoStallOut:
    return from_row(LsoStallOut, episode, cluster=cluster,
                    duration_seconds=seconds_between(episode.started_at, episode.ended_at or now))
