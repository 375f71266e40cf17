"""A real headless browser (Debian's chromium driven by Playwright) with the network cut to loopback.

Every request the page makes to anything but 127.0.0.1 is aborted and recorded, every console
error and uncaught page error is recorded: a page passes only if both lists stay empty.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

from tests.fixtures.lanes import refuse_in_fast_lane

LOCAL_HOSTS = frozenset({"127.0.0.1"})


def chromium_path() -> str:
    path = os.environ.get("TXNWATCH_CHROMIUM") or shutil.which("chromium")
    if path is None:
        raise RuntimeError("no chromium: run scripts/bootstrap.sh --test (apt-get install chromium)")
    return path


@dataclass
class Visit:
    """One page load's evidence."""

    page: Any
    errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.blocked == [], f"requests left 127.0.0.1: {self.blocked}"
        assert self.errors == [], f"console errors: {self.errors}"


class Browser:
    def __init__(self) -> None:
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        # --no-sandbox: CI runs as root, where chromium refuses its sandbox.
        self.browser = self._pw.chromium.launch(executable_path=chromium_path(), headless=True,
                                                args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])

    @contextmanager
    def open(self, url: str, *, width: int = 1280, height: int = 900, **goto: Any) -> Iterator[Visit]:
        context = self.browser.new_context(viewport={"width": width, "height": height}, locale="en-US",
                                           timezone_id="UTC", service_workers="block")
        page = context.new_page()
        visit = Visit(page)

        def route(r: Any) -> None:
            parsed = urlparse(r.request.url)
            if parsed.scheme in ("data", "blob") or parsed.hostname in LOCAL_HOSTS:
                r.continue_()
            else:
                visit.blocked.append(r.request.url)
                r.abort("internetdisconnected")

        context.route("**/*", route)
        def console(msg: Any) -> None:
            if msg.type == "error":
                visit.errors.append(msg.text)

        def uncaught(exc: Any) -> None:
            visit.errors.append(f"uncaught: {exc}")

        page.on("console", console)
        page.on("pageerror", uncaught)
        try:
            page.goto(url, wait_until="networkidle", **goto)
            yield visit
        finally:
            context.close()

    def close(self) -> None:
        self.browser.close()
        self._pw.stop()


def browser_session() -> Iterator[Browser]:
    refuse_in_fast_lane("a browser", "browser")
    b = Browser()
    try:
        yield b
    finally:
        b.close()
