"""Tables for the terminal (rich): columns wrap or fold to fit the width instead of running off the edge.

Piped output (not a terminal) keeps every character: rich falls back to 80 columns there, so
the width is taken from COLUMNS or, failing that, made wide enough for the longest row.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str | None = None,
           width: int | None = None) -> str:
    from rich.box import SIMPLE_HEAD
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, box=SIMPLE_HEAD, header_style="bold", title_justify="left", show_edge=False,
                  pad_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold")  # wrap a long id onto more lines, never cut it off
    for row in rows:
        table.add_row(*("—" if v is None else str(v) for v in row))
    if width is None:
        width = int(os.environ.get("COLUMNS", "0")) or shutil.get_terminal_size((0, 0)).columns or 10_000
    buffer = io.StringIO()
    Console(file=buffer, width=width, color_system=None, soft_wrap=False).print(table)
    return "\n".join(line.rstrip() for line in buffer.getvalue().splitlines())
