"""Children die with their parent (issue 38 item 9): `txnwatch run`'s Parquet archive child never outlives it.

The daemon runs its history export at start in a child process.  Here the archive's manifest is a FIFO
nobody writes, so the child is held inside the export (its ``open()`` of the manifest waits for a writer)
for as long as it lives: an export in progress.  On SIGTERM the daemon ends the child before it exits;
killed with SIGKILL, it cannot, and the kernel ends the child (``PR_SET_PDEATHSIG``).  Either way the
child is gone within seconds and nothing holds the archive open: a writer opening the FIFO without
blocking finds no reader (ENXIO).
"""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fixtures.daemon import free_port, wait_for

pytest.importorskip("pyarrow")  # the archive extra: without it no child is started


def children_of(pid: int, marker: str = "txnwatch.store.archive_job") -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        if ppid == pid and marker.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def opening_the_manifest(pid: int) -> bool:
    """A thread of ``pid`` waits in the FIFO's open() for a writer (the kernel's wait_for_partner)."""
    try:
        return any(Path(f"/proc/{pid}/task/{task}/wchan").read_text() == "wait_for_partner"
                   for task in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return False


def archive_open_by_nobody(fifo: Path) -> bool:
    """No reader has the FIFO open (a non-blocking writer gets ENXIO); only asked once the child is gone, since
    a writer that comes and goes would hand a waiting reader an empty manifest."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as exc:
        return exc.errno == errno.ENXIO
    os.close(fd)
    return False


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    archive = tmp_path / "archive"
    archive.mkdir()
    fifo = archive / "_manifest.json"
    os.mkfifo(fifo)
    config = {
        "database_url": f"sqlite:///{tmp_path / 'db.sqlite'}",
        "api": {"host": "127.0.0.1", "port": free_port()},
        "metrics": {"port": 0},
        "retention": {"archive_dir": str(archive)},
        "transaction_log": {"enabled": False},
        "clusters": [{"name": "gone", "bootstrap_servers": f"127.0.0.1:{free_port()}", "request_timeout_ms": 1000}],
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    log = (tmp_path / "txnwatch.log").open("wb")
    proc = subprocess.Popen([sys.executable, "-m", "txnwatch", "run", "--config", str(path)],
                            stdout=log, stderr=subprocess.STDOUT)
    started: list[int] = []
    try:
        wait_for(lambda: len(children_of(proc.pid)) == 1, 40, what="the archive child to start")
        started.extend(children_of(proc.pid))
        wait_for(lambda: opening_the_manifest(started[0]), 30, what="the archive child to be mid-export")
        yield proc, started[0], fifo
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in started:  # a child that outlived its daemon (the failure shown) is not left behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        log.close()


def _gone_within(pid: int, seconds: float) -> float:
    start = time.monotonic()
    while alive(pid):
        if time.monotonic() - start > seconds:
            pytest.fail(f"the archive child {pid} still runs {seconds:.0f} s after its daemon was stopped")
        time.sleep(0.05)
    return time.monotonic() - start


def test_sigterm_ends_the_archive_child_before_the_daemon_exits(
        daemon: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    proc, child, fifo = daemon
    proc.send_signal(signal.SIGTERM)
    _gone_within(child, 5)  # the daemon's stop ends it first (SIGTERM, SIGKILL after 5 s)
    assert proc.wait(timeout=30) in (0, -signal.SIGTERM)  # uvicorn re-raises SIGTERM after a clean shutdown
    assert archive_open_by_nobody(fifo)


def test_kill_9_of_the_daemon_takes_the_archive_child_along(
        daemon: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    proc, child, fifo = daemon
    proc.kill()
    proc.wait()
    _gone_within(child, 3)
    assert archive_open_by_nobody(fifo)
