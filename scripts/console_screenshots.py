"""Regenerate the console screenshots in docs/console/ (PNG) and their content hashes.

Renders the console over a fixed, seeded database at a frozen time (tests/console/scenario.py),
photographs each page in headless chromium with the network cut to loopback, and records a hash
of what was rendered (HTML, CSS, JS, library versions).  tests/console/test_screenshots.py fails
when the hashes no longer match what the console renders: run this script and commit the result.

    .venv/bin/python scripts/console_screenshots.py

docs/console/demo-*.png are captures of the live `make run` demo, not rendered here: the test lists them
(DEMO_CAPTURES) so that a stray PNG still fails it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "docs" / "console"
MANIFEST = OUT / "screenshots.json"


def main() -> int:
    import uvicorn

    from tests.console.browser import Browser
    from tests.console.scenario import PAGES, console_client, rendered_hashes
    from txnwatch.lab.ports import free_ports

    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, console_client(Path(tmp)) as client:
        hashes = rendered_hashes(client)
        port = free_ports(1)[0]
        server = uvicorn.Server(uvicorn.Config(client.app, host="127.0.0.1", port=port, log_config=None,
                                               access_log=False, lifespan="off"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.05)
        browser = Browser()
        try:
            for name, path in PAGES.items():
                with browser.open(f"http://127.0.0.1:{port}{path}", width=1200, height=820) as visit:
                    visit.assert_clean()
                    visit.page.wait_for_timeout(300)  # ECharts draws on the next animation frame
                    visit.page.screenshot(path=str(OUT / f"{name}.png"), full_page=False)
        finally:
            browser.close()
            server.should_exit = True
            thread.join(timeout=10)
    MANIFEST.write_text(json.dumps(hashes, indent=2, sort_keys=True) + "\n")
    for name in PAGES:
        print(f"docs/console/{name}.png  {(OUT / f'{name}.png').stat().st_size // 1024} KiB", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
