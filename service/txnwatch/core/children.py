"""A child process that must not outlive the daemon that started it (issue 38 item 9).

Linux: ``PR_SET_PDEATHSIG`` has the kernel send SIGTERM to the child when the thread that started it
exits, so a parent killed with ``kill -9`` takes the child with it; the parent's pid is checked right
after (it may have died before the call took effect) and then once a second by a daemon thread, for
systems without prctl and for a parent whose pid changed hands.  The daemon's orderly stop ends its
children itself (txnwatch.store.archive_job.Children); this is for when it cannot.
"""

from __future__ import annotations

import ctypes
import os
import signal
import threading
import time

_PR_SET_PDEATHSIG = 1
CHECK_INTERVAL_S = 1.0


def die_with_parent(parent_pid: int, check_interval_s: float = CHECK_INTERVAL_S) -> None:
    """Call first thing in the child: from now on it ends (SIGTERM) when ``parent_pid`` is gone."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):  # not Linux: the pid check below still ends us
        pass
    if os.getppid() != parent_pid:  # the parent died before prctl took effect (we were re-parented)
        os._exit(143)

    def watch() -> None:
        while True:
            time.sleep(check_interval_s)
            if os.getppid() != parent_pid:
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()
