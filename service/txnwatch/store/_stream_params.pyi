"""Types of the compiled stream-row parameters (``_stream_params.c``)."""

from collections.abc import Callable, Sequence
from typing import Any

FIELDS: int
WIDTH: int

def stream_params(head: tuple[Any, ...], transitions: Sequence[tuple[Any, ...]], start: int, stop: int,
                  joined: dict[tuple[tuple[str, int], ...], str],
                  join: Callable[[tuple[tuple[str, int], ...]], str]) -> tuple[Any, ...]: ...
