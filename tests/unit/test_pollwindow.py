"""The poll window pauses CPython's cyclic GC while any poll runs, and restores it as it found it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from txnwatch.core.pollwindow import PollWindow


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


def test_wait_quiet_waits_for_the_poll_and_no_longer(gc_enabled: None) -> None:
    import threading

    window = PollWindow()
    assert window.wait_quiet(0)  # nothing polls: at once
    poll = window.poll()
    poll.__enter__()
    assert not window.wait_quiet(0.01)  # bounded while a poll runs
    quiet = threading.Event()

    def wait() -> None:
        if window.wait_quiet(60):
            quiet.set()

    waiter = threading.Thread(target=wait)
    waiter.start()
    assert not quiet.wait(0.2), "returned while the poll still ran"
    poll.__exit__(None, None, None)
    assert quiet.wait(60)
    waiter.join()


def test_polls_that_never_leave_a_gap_still_get_their_cyclic_garbage_collected(gc_enabled: None) -> None:
    """Many clusters' polls overlapping for longer than the longest pause: the poll that ends after it
    runs a full collection itself, and the GC stays paused for the polls still in flight."""

    class Cycle:
        def __init__(self) -> None:
            self.me = self

    import time
    import weakref

    window = PollWindow(max_pause_s=0.05)
    running = window.poll()
    running.__enter__()
    garbage = Cycle()
    gone = weakref.ref(garbage)
    del garbage
    with window.poll():
        pass  # ends before the pause is long: nothing collected
    assert gone() is not None and window.forced_collections == 0
    time.sleep(0.06)
    with window.poll():
        pass  # ends after it, while `running` still runs
    assert gone() is None and window.forced_collections == 1
    assert not gc.isenabled(), "the poll still in flight keeps the GC paused"
    running.__exit__(None, None, None)
    assert gc.isenabled()


def test_a_batch_pauses_the_gc_but_wait_quiet_does_not_wait_for_it(gc_enabled: None) -> None:
    """The transaction-log tail's steps (PollWindow.batch): the GC waits for them as for a poll, a render's
    wait_quiet does not (a busy log's tail runs step after step)."""
    window = PollWindow()
    batch = window.batch()
    batch.__enter__()
    assert not gc.isenabled() and window.polling == 0
    assert window.wait_quiet(0), "a batch is not a poll"
    with window.poll():
        assert not window.wait_quiet(0)
    assert not gc.isenabled(), "the batch still runs after the poll ended"
    batch.__exit__(None, None, None)
    assert gc.isenabled()


def test_gc_resumes_after_a_failed_batch(gc_enabled: None) -> None:
    window = PollWindow()
    with pytest.raises(ConnectionError), window.batch():
        raise ConnectionError("the log's leader went away")
    assert gc.isenabled()
