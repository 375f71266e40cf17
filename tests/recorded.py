"""Figures recorded from an earlier version of the code, to check a rewrite of it against.

One JSON file per corpus: where the figures come from, and one line per case (what the test's
``found(case)`` returned when it was recorded), so a diff of a re-recording reads case by case.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load(path: Path, cases: int) -> list[dict[str, Any]]:
    recorded: list[dict[str, Any]] = json.loads(path.read_text())["cases"]
    assert len(recorded) == cases, f"{path.name} holds {len(recorded)} cases, the corpus {cases}"
    return recorded


def record(path: Path, recorded_from: str, found: Callable[[int], dict[str, Any]], cases: int) -> None:
    path.parent.mkdir(exist_ok=True)
    lines = ",\n".join(json.dumps(found(case), separators=(",", ":")) for case in range(cases))
    path.write_text(f'{{"recorded_from": {json.dumps(recorded_from)}, "cases": [\n{lines}\n]}}\n')
    print(f"recorded {cases} cases into {path}")
