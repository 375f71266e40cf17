"""Every thread of the daemon carries an OS name (core/threadnames.py), so ``top -H`` and a per-thread CPU split
say which one pays: ours name themselves at the start of their run, libraries' are named from outside."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from txnwatch.core import threadnames

linux_only = pytest.mark.skipif(not Path("/proc/self/task").is_dir() or not sys.platform.startswith("linux"),
                                reason="thread names are read from /proc/self/task/<tid>/comm")


def comm(tid: int) -> str:
    return Path(f"/proc/self/task/{tid}/comm").read_text().strip()


@pytest.mark.parametrize(("name", "expected"), [
    pytest.param("exposition", b"exposition", id="short-kept"),
    pytest.param("txnlog:production-eu", b"txnlog:producti", id="cut-to-15-bytes"),
    pytest.param("txnlog:prodüüüüüüü", b"txnlog:prod\xc3\xbc\xc3\xbc", id="cut-on-a-character-boundary"),
])
def test_os_name_is_what_the_kernel_keeps(name: str, expected: bytes) -> None:
    assert threadnames.os_name(name) == expected


@pytest.mark.parametrize(("python_name", "expected"), [
    pytest.param("kafka-io-txnwatch-txnlog", "kio-txnwatch-txnlog", id="kafka-python-io-loop"),
    pytest.param("APScheduler", "scheduler", id="apscheduler"),
    pytest.param("ThreadPoolExecutor-3_1", "pool-3_1", id="unnamed-pool"),
    pytest.param("AnyIO worker thread", "api-sync", id="starlette-sync-route"),
    pytest.param("poll_0", "poll_0", id="ours-kept"),
])
def test_library_names_are_shortened(python_name: str, expected: str) -> None:
    assert threadnames.short_name(python_name) == expected


@linux_only
def test_a_thread_names_itself_before_its_work() -> None:
    seen: list[str] = []
    thread = threadnames.thread(lambda word: seen.append(f"{word}:{comm(threading.get_native_id())}"), "outbox",
                                args=("ran",))
    thread.start()
    thread.join(5)
    assert seen == ["ran:outbox"]
    assert thread.daemon and thread.name == "outbox"


@linux_only
def test_library_threads_are_named_from_outside_once_and_main_keeps_the_process_name() -> None:
    main_before = comm(threading.main_thread().native_id or 0)
    release, ready = threading.Event(), threading.Event()

    def library_loop() -> None:
        ready.set()
        release.wait(10)

    thread = threading.Thread(target=library_loop, name="kafka-io-txnwatch-txnlog", daemon=True)
    thread.start()
    ready.wait(5)
    try:
        assert comm(thread.native_id or 0) != "kio-txnwatch-tx"
        assert threadnames.name_threads() >= 1
        assert comm(thread.native_id or 0) == "kio-txnwatch-tx"
        assert threadnames.name_threads() == 0  # nothing new: nothing written again
        assert comm(threading.main_thread().native_id or 0) == main_before
    finally:
        release.set()
        thread.join(5)


def test_no_proc_names_nothing(tmp_path: Path) -> None:
    assert threadnames.name_threads(tmp_path / "absent") == 0
