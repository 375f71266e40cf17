"""The daemon's archive child (txnwatch.store.archive_job.Children): its stop ends the running child and no
child starts after it (issue 38 item 9: nothing writes after the daemon has stopped)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from txnwatch.store.archive_job import Children

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


def stubborn(ready: Path) -> list[str]:
    return [sys.executable, "-c", "import pathlib, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"]


def test_stop_ends_the_running_child_and_refuses_new_ones() -> None:
    children = Children()
    child = children.spawn(SLEEPER, {})
    assert child is not None and child.poll() is None
    children.stop(grace_s=5)
    assert child.poll() == -15
    assert children.spawn(SLEEPER, {}) is None, "a job due after the stop starts nothing"
    children.start()  # a runtime started again (tests, a restarted service) spawns again
    again = children.spawn(SLEEPER, {})
    assert again is not None
    children.stop()
    assert again.poll() is not None


def test_a_child_deaf_to_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    children = Children()
    ready = tmp_path / "ready"
    child = children.spawn(stubborn(ready), {})
    assert child is not None
    while not ready.exists():
        time.sleep(0.01)
    started = time.monotonic()
    children.stop(grace_s=0.5)
    assert child.poll() == -9 and time.monotonic() - started < 5


def test_the_waiting_job_returns_when_the_daemon_stops() -> None:
    """The job thread (the collector's, whose stop waits for it) is not held for the child's hour."""
    children = Children()
    child = children.spawn(SLEEPER, {})
    assert child is not None
    waited: list[int] = []
    thread = threading.Thread(target=lambda: waited.append(child.wait(3600)))
    thread.start()
    children.stop()
    thread.join(5)
    assert waited == [-15]
    assert isinstance(child, subprocess.Popen)
