"""docs/console/*.png show what the console renders now (by content hash, not pixels; see scenario.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.console.scenario import PAGES, console_client, rendered_hashes

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"


def test_screenshots_are_current(tmp_path: Path) -> None:
    recorded = json.loads((DOCS / "screenshots.json").read_text())
    with console_client(tmp_path) as client:
        current = rendered_hashes(client)
    stale = sorted(name for name in PAGES if recorded.get(name) != current[name])
    assert not stale, f"console pages changed ({', '.join(stale)}): run .venv/bin/python scripts/console_screenshots.py"
    for name in PAGES:
        size = (DOCS / f"{name}.png").stat().st_size
        assert 10_000 < size < 300_000, f"{name}.png is {size} bytes: keep screenshots small (1200x820, no full page)"


@pytest.mark.parametrize("name", list(PAGES))
def test_docs_show_every_screenshot(name: str) -> None:
    assert f"(console/{name}.png)" in (DOCS.parent / "console.md").read_text()
