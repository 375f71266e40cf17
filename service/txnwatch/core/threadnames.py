"""OS names for the daemon's threads, so ``top -H``, ``ps -L`` and ``/proc/PID/task/*/comm`` say which one pays.

CPython (before 3.14) gives its threads no OS name: every thread of the daemon shows as the process's name,
and a CPU profile by thread (the peers benchmark's, an operator's ``top -H``) cannot tell the poll from the
transaction-log tail or kafka-python's I/O loop.  Linux keeps a 15-byte name per thread (``comm``).

* :func:`thread` builds every thread txnwatch starts: its run sets its own OS name first
  (``prctl(PR_SET_NAME)``), before any work.
* :func:`name_threads` names, from outside, the threads that libraries start (kafka-python's
  ``kafka-io-<client>`` loops, APScheduler's scheduler and pool): it writes ``/proc/self/task/<tid>/comm``
  once per new thread (kept by native id), so calling it after each poll costs a walk of ~15 threads.
  The main thread keeps its name: it is the process's (``ps``, ``pgrep``).

Both do nothing where the OS has no such name (no ``/proc``, no ``prctl``): a name is a label, never a
reason to fail.  The Python ``Thread.name`` is left as it was.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

OS_NAME_BYTES = 15  # TASK_COMM_LEN 16, with its NUL
_PR_SET_NAME = 15

# Python thread names that libraries choose: their prefix -> ours (the rest of the name is kept).
LIBRARY_NAMES: tuple[tuple[str, str], ...] = (
    ("kafka-io-", "kio-"),  # kafka-python 3's I/O loop per client: 'kafka-io-<client_id>'
    ("APScheduler", "scheduler"),  # APScheduler's BackgroundScheduler
    ("AnyIO worker thread", "api-sync"),  # Starlette's pool for sync routes
    ("ThreadPoolExecutor-", "pool-"),  # concurrent.futures without a prefix
)

_named: set[int] = set()  # native ids already named by name_threads (a thread's id is not reused while it lives)
_lock = threading.Lock()
_libc: Any = None


def os_name(name: str) -> bytes:
    """``name`` cut to the 15 bytes the kernel keeps, on a character boundary."""
    raw = name.encode("utf-8", "replace")[:OS_NAME_BYTES]
    return raw.decode("utf-8", "ignore").encode("utf-8")


def short_name(python_name: str) -> str:
    """The OS name for a thread a library started: its known prefix shortened, else its Python name."""
    for prefix, short in LIBRARY_NAMES:
        if python_name.startswith(prefix):
            return short + python_name[len(prefix):]
    return python_name


def name_current(name: str) -> bool:
    """Give the calling thread the OS name ``name`` (cut to 15 bytes); False where the OS has none."""
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        return int(_libc.prctl(_PR_SET_NAME, ctypes.c_char_p(os_name(name)), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def thread(target: Callable[..., object], name: str, *, args: tuple[Any, ...] = (),
           daemon: bool = True) -> threading.Thread:
    """A thread (not started) whose run names itself ``name`` in the OS before calling ``target``."""

    def run() -> None:
        name_current(name)
        with _lock:
            if (tid := threading.get_native_id()) is not None:
                _named.add(tid)
        target(*args)

    return threading.Thread(target=run, name=name, daemon=daemon)


def name_threads(proc_task: Path = Path("/proc/self/task")) -> int:
    """Name every live thread of this process not named yet (see the module's docstring); how many it named."""
    if not proc_task.is_dir():
        return 0
    done = 0
    with _lock:
        main = threading.main_thread()
        live = {t.native_id: t.name for t in threading.enumerate()
                if t.native_id is not None and t is not main}  # the main thread's name is the process's
        _named.intersection_update(live)  # ended threads: their ids may be reused by new ones
        for tid, python_name in live.items():
            if tid in _named:
                continue
            try:
                (proc_task / str(tid) / "comm").write_bytes(os_name(short_name(python_name)))
            except OSError:  # the thread ended meanwhile, or comm is not writable here
                continue
            _named.add(tid)
            done += 1
    return done


def name_current_from_python() -> None:
    """Name the calling thread from its Python name (a pool's ``initializer``: its threads are the pool's)."""
    name_current(short_name(threading.current_thread().name))
