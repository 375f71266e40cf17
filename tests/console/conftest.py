from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.browser import Browser, browser_session


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One chromium for every browser test of this package, closed when the package is done: Playwright's
    sync API keeps an asyncio loop running in the main thread while it is open, and every later test that
    calls asyncio.run() (the Kafka layer's polls) would fail with "cannot be called from a running event loop"."""
    yield from browser_session()
