from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.console.browser import Browser, browser_session


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    """One chromium for every browser test of the session."""
    yield from browser_session()
