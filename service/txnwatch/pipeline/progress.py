"""Stage messages for a person watching a run: what happened, how much, how long."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO


class Progress:
    def __init__(self, out: TextIO | None = None, quiet: bool = False) -> None:
        self._out = out or sys.stderr
        self._quiet = quiet
        self._t0 = time.perf_counter()

    def note(self, message: str) -> None:
        if not self._quiet:
            print(f"[{time.perf_counter() - self._t0:7.1f}s] {message}", file=self._out, flush=True)

    @contextmanager
    def stage(self, name: str) -> Iterator[dict[str, str]]:
        """Yields a dict the stage fills with figures to report when it ends."""
        figures: dict[str, str] = {}
        start = time.perf_counter()
        self.note(f"{name} …")
        yield figures
        shown = ", ".join(f"{k} {v}" for k, v in figures.items())
        self.note(f"{name} done in {time.perf_counter() - start:.1f}s" + (f": {shown}" if shown else ""))
