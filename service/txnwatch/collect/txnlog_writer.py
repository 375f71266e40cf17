"""One commit of the transaction-log tail in flight on a thread of its own, so the next fetches overlap it.

The tail (collect/txnlog_tail.py) ran fetch, decode, apply and the SQLite store on one thread: SQLite's
C work (run by CPython's sqlite3 with the GIL released inside each step) never overlapped Python's fetch,
decode and apply (issue 25).  Here a commit is handed to a writer thread and the tail reads on.

The hand-off holds ONE commit: :meth:`CommitWriter.submit` refuses while one is in flight, so the caller
must :meth:`CommitWriter.wait` first (back-pressure: the tail never runs more than one commit ahead of the
database, and no queue grows).  ``wait`` hands back the commit's exception, if any, to the tail's thread,
where it is handled as a failed write always was; nothing is lost silently.  The thread starts with the
first commit and :meth:`close` ends it (after the commit in flight finishes); a later ``submit`` starts
it again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from txnwatch.core import threadnames


class CommitWriter:
    """Runs one job at a time on its own thread; the job's outcome is collected with :meth:`wait`."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._lock = threading.Condition()
        self._job: Callable[[], None] | None = None  # handed off, not yet finished
        self._busy = False  # a job is handed off and its outcome not yet collected
        self._error: BaseException | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None

    @property
    def busy(self) -> bool:
        """A commit was handed off and its outcome not yet collected by :meth:`wait`."""
        with self._lock:
            return self._busy

    @property
    def free(self) -> bool:
        """No commit is running: none was handed off, or the one handed off has finished (its outcome may still
        wait for :meth:`wait`, which then returns at once).  The tail hands off an early commit only then, so a
        busy log's commits follow the database's pace instead of blocking the reader behind one."""
        with self._lock:
            return self._job is None

    def submit(self, job: Callable[[], None]) -> None:
        """Hand ``job`` to the writer thread; the previous one must have been collected with :meth:`wait`."""
        with self._lock:
            if self._busy:
                raise RuntimeError("a commit is still in flight: wait() for it before submitting the next")
            self._job, self._busy, self._error = job, True, None
            if self._thread is None:
                self._stopping = False
                self._thread = threadnames.thread(self._run, self._name)
                self._thread.start()
            self._lock.notify_all()

    def wait(self) -> BaseException | None:
        """Block until the job in flight (if any) is done; its exception, or None (also when none was)."""
        with self._lock:
            while self._job is not None:
                self._lock.wait()
            error, self._error, self._busy = self._error, None, False
            return error

    def close(self) -> None:
        """Let the job in flight finish, then end the thread (its outcome stays for :meth:`wait`)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stopping = True
            self._lock.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def _run(self) -> None:
        while True:
            with self._lock:
                while self._job is None and not self._stopping:
                    self._lock.wait()
                job = self._job
                if job is None:
                    return
            error: BaseException | None = None
            try:
                job()
            except BaseException as exc:  # handed to the tail's thread, which decides (as for its own writes)
                error = exc
            with self._lock:
                self._job, self._error = None, error
                self._lock.notify_all()
