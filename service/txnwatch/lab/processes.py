"""Start, signal and reap the lab's OS processes, and make sure we only ever touch our own.

A pid from a state file may have been reused by an unrelated process after a
reboot or crash, so before signalling we check that /proc/<pid>/cmdline still
contains a marker unique to this lab (its own config file path).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """preexec_fn: have the kernel SIGKILL the child if the parent (e.g. a crashed pytest) dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spawn(cmd: list[str], log_file: Path, cwd: Path, *, die_with_parent: bool,
          env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start `cmd` in its own session (so a terminal's Ctrl-C does not hit it), output appended to `log_file`."""
    with open(log_file, "ab") as log:
        return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd,
                                start_new_session=True, env=env,
                                preexec_fn=_die_with_parent if die_with_parent else None)


def process_state(pid: int | None, marker: str, child: subprocess.Popen[bytes] | None = None) -> str:
    """'running', 'frozen' (SIGSTOPped), or 'dead' (gone, zombie, or a different process under that pid).

    For our own children the Popen handle is the truth (and reaps them); the
    cmdline marker is for pids read back from a state file.
    """
    if not pid:
        return "dead"
    if child is not None:
        if child.poll() is not None:
            return "dead"
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return "running"
        return "frozen" if state in ("T", "t") else "running"
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "dead"
    if marker not in cmdline:
        return "dead"
    state = stat.rsplit(")", 1)[1].split()[0]
    if state in ("Z", "X"):
        return "dead"
    return "frozen" if state in ("T", "t") else "running"


def signal_if_ours(pid: int | None, marker: str, sig: int,
                   child: subprocess.Popen[bytes] | None = None) -> bool:
    if process_state(pid, marker, child) == "dead":
        return False
    assert pid is not None
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


def stop(pids: dict[int, str], *, timeout: float = 20.0, kill: bool = False,
         children: dict[int, subprocess.Popen[bytes]] | None = None) -> None:
    """Stop every pid (value: its cmdline marker) together: SIGCONT + SIGTERM, then SIGKILL after `timeout`.

    Frozen processes get SIGCONT first, or SIGTERM would wait forever.  When
    we are the parent, the Popen handles are used to reap the children.
    """
    children = children or {}
    live = {pid: m for pid, m in pids.items() if process_state(pid, m, children.get(pid)) != "dead"}
    for pid, marker in live.items():
        signal_if_ours(pid, marker, signal.SIGKILL if kill else signal.SIGTERM, children.get(pid))
        signal_if_ours(pid, marker, signal.SIGCONT, children.get(pid))
    deadline = time.monotonic() + timeout
    while live and time.monotonic() < deadline:
        for pid in list(live):
            if process_state(pid, live[pid], children.get(pid)) == "dead":
                del live[pid]
        time.sleep(0.1)
    for pid, marker in live.items():
        signal_if_ours(pid, marker, signal.SIGKILL, children.get(pid))
    for pid in pids:
        if pid in children:
            try:
                children[pid].wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
