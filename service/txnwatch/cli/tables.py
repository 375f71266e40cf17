"""Tables for the terminal (rich): columns wrap or fold to fit the width instead of running off the edge.

Piped output (not a terminal) keeps every character: rich falls back to 80 columns there, so
the width is taken from COLUMNS or, failing that, made wide enough for the longest row.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Sequence


def terminal_width() -> int:
    """COLUMNS, else the terminal's width, else wide enough for anything (piped output keeps every character)."""
    return int(os.environ.get("COLUMNS", "0") or 0) or shutil.get_terminal_size((0, 0)).columns or 10_000


def natural_width(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> int:
    """How wide the table is when nothing wraps."""
    return max(len(line) for line in render(headers, rows, width=10_000).splitlines())


def flow(cells: Sequence[str], width: int, hang: int = 0) -> list[str]:
    """Cells laid out left to right, three spaces apart, a cell moving whole to the next line when it does not
    fit: wrapping by cell, never inside one (a cell wider than a whole line is folded, the only way to keep it).
    Lines after the first are indented by ``hang``."""
    lines: list[str] = []
    current = ""

    def start() -> str:
        return " " * hang if lines else ""

    for cell in cells:
        if current and len(current) + 3 + len(cell) > width:
            lines.append(current)
            current = ""
        while not current and len(start()) + len(cell) > width:  # longer than any line: fold, keep every character
            room = max(1, width - len(start()))
            lines.append(start() + cell[:room])
            cell = cell[room:]
        current = f"{current}   {cell}" if current else start() + cell
    if current:
        lines.append(current)
    return lines


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str | None = None,
           width: int | None = None, whole: Sequence[int] = ()) -> str:
    """``whole``: columns whose cells never wrap (numbers, short ages); the others wrap between words and
    fold only a word longer than the column."""
    from rich.box import SIMPLE_HEAD
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, box=SIMPLE_HEAD, header_style="bold", title_justify="left", show_edge=False,
                  pad_edge=False)
    for i, header in enumerate(headers):
        if i in whole:
            table.add_column(header, no_wrap=True)
        else:
            table.add_column(header, overflow="fold")  # wrap a long id onto more lines, never cut it off
    for row in rows:
        table.add_row(*("—" if v is None else str(v) for v in row))
    if width is None:
        width = terminal_width()
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, soft_wrap=False).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
