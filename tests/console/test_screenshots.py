"""docs/console/*.png show what the console renders now (by content hash, not pixels; see scenario.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.console.scenario import PAGES, console_client, rendered_hashes

DOCS = Path(__file__).resolve().parents[2] / "docs" / "console"

# Captures of the live `make run` demo (docs/console.md, "On the live demo"): real Kafka and real time, so no
# content hash can say when they are stale, and scripts/console_screenshots.py does not regenerate them.
DEMO_CAPTURES = tuple(f"demo-{at}-{page}" for at in ("2min", "4min") for page in ("now", "partition", "transaction"))


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


def test_every_png_is_a_rendered_screenshot_or_a_known_demo_capture() -> None:
    found = {p.stem for p in DOCS.glob("*.png")}
    unknown = sorted(found - set(PAGES) - set(DEMO_CAPTURES))
    assert not unknown, f"docs/console has PNGs neither rendered by the script nor listed as demo captures: {unknown}"


@pytest.mark.parametrize("name", DEMO_CAPTURES)
def test_demo_captures_are_kept_small_and_shown(name: str) -> None:
    size = (DOCS / f"{name}.png").stat().st_size
    assert 10_000 < size < 100_000, f"{name}.png is {size} bytes: quantize it (pngquant) or shoot 1200x820 only"
    assert f"(console/{name}.png)" in (DOCS.parent / "console.md").read_text()
