"""The poll window pauses CPython's cyclic GC while any poll runs, and restores it as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from txnwatch.pollwindow import PollWindow


@pytest.fixture
def gc_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        (gc.enable if was else gc.disable)()


def test_gc_paused_until_the_last_overlapping_poll_ends(gc_enabled: None) -> None:
    window = PollWindow()
    first, second = window.poll(), window.poll()
    first.__enter__()
    assert not gc.isenabled() and window.polling == 1
    second.__enter__()
    first.__exit__(None, None, None)
    assert not gc.isenabled(), "another cluster's poll still runs"
    second.__exit__(None, None, None)
    assert gc.isenabled() and window.polling == 0


def test_gc_resumes_after_a_failed_poll(gc_enabled: None) -> None:
    window = PollWindow()
    with pytest.raises(ConnectionError), window.poll():
        raise ConnectionError("no broker answered")
    assert gc.isenabled() and window.polling == 0


def test_gc_left_off_if_it_was_off(gc_enabled: None) -> None:
    """Someone else (an embedding application) turned the GC off: a poll must not turn it on."""
    gc.disable()
    with PollWindow().poll():
        pass
    assert not gc.isenabled()
