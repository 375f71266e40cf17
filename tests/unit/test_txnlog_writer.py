"""CommitWriter: one job in flight at most, its outcome handed back, its thread ended and restarted."""

from __future__ import annotations

import threading
import time

import pytest

from txnwatch.collect.txnlog_writer import CommitWriter


def test_one_job_in_flight_and_its_error_comes_back() -> None:
    writer = CommitWriter("w-test")
    gate = threading.Event()
    ran: list[str] = []

    def first() -> None:
        gate.wait(5)
        ran.append("first")

    assert writer.free  # nothing handed off yet
    writer.submit(first)
    assert writer.busy and not writer.free
    with pytest.raises(RuntimeError, match="still in flight"):
        writer.submit(lambda: ran.append("second"))  # back-pressure: no queue behind the one in flight
    gate.set()
    for _ in range(500):  # the job finishes on the writer's thread
        if writer.free:
            break
        time.sleep(0.01)
    assert writer.free and writer.busy and ran == ["first"]  # finished, its outcome not collected yet
    assert writer.wait() is None and not writer.busy and writer.free

    def fails() -> None:
        raise OSError("disk full")

    writer.submit(fails)
    error = writer.wait()
    assert isinstance(error, OSError) and str(error) == "disk full"
    assert writer.wait() is None  # collected once
    writer.close()


def test_close_lets_the_job_finish_and_a_later_submit_starts_again() -> None:
    writer = CommitWriter("w-test")
    ran: list[int] = []
    writer.submit(lambda: ran.append(1))
    writer.close()
    assert ran == [1] and writer.wait() is None
    writer.submit(lambda: ran.append(threading.get_ident()))
    assert writer.wait() is None and len(ran) == 2 and ran[1] != threading.get_ident()
    writer.close()
    assert not [t for t in threading.enumerate() if t.name == "w-test"]
