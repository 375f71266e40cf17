"""The daemon's archive jobs (history, then the transition stream) run in a short-lived child process.

Why a child: writing Parquet needs pyarrow, and once imported pyarrow stays in a process for good
(~45 MB of resident memory, a third of an idle daemon's). The jobs run hourly and (transitions) every
10 minutes or 20,000 staged rows (txnwatch.store.archive_pacing), for a second or two; the daemon keeps its
memory for what it does all the time (issue 18: idle RSS <= 100 MB). One job at a time: both rewrite the archive's manifest.

The child gets the database URL through its environment (never its command line, which ``ps``
shows), does exactly what the in-process job did — archive first, purge only what is archived —
and reports success by its exit status. Its log lines go to the daemon's stderr.

The child never outlives the daemon (issue 38 item 9: it ran on, writing, up to its hour's timeout after
``txnwatch run`` had stopped): the daemon's stop ends it first (:class:`Children`: SIGTERM, SIGKILL after
:data:`STOP_GRACE_S`; no new child after that), and a daemon killed outright takes it along
(txnwatch.core.children.die_with_parent: ``PR_SET_PDEATHSIG`` and the parent's pid watched).  Ended
mid-export, it leaves at most a Parquet file the manifest does not list, which the next export replaces;
nothing is purged that is not archived.

    python -m txnwatch.store.archive_job history|transitions
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone

from txnwatch.core.config import Settings

log = logging.getLogger(__name__)

JOBS = ("history", "transitions")
#: A job that has not finished in this long is stopped; nothing is purged then.
CHILD_TIMEOUT_S = 3600.0
#: How long a child has to exit on SIGTERM when the daemon stops before it is killed.
STOP_GRACE_S = 5.0
_PARENT_ENV = "TXNWATCH_ARCHIVE_JOB_PARENT_PID"
_ENV = {
    "database_url": "TXNWATCH_ARCHIVE_JOB_DATABASE_URL",
    "archive_dir": "TXNWATCH_ARCHIVE_JOB_ARCHIVE_DIR",
    "retention_days": "TXNWATCH_ARCHIVE_JOB_RETENTION_DAYS",
    "archive_days": "TXNWATCH_ARCHIVE_JOB_ARCHIVE_DAYS",
    "downsample_after_hours": "TXNWATCH_ARCHIVE_JOB_DOWNSAMPLE_AFTER_HOURS",
    "downsample_minutes": "TXNWATCH_ARCHIVE_JOB_DOWNSAMPLE_MINUTES",
    "hot_minutes": "TXNWATCH_ARCHIVE_JOB_HOT_MINUTES",
    "log_level": "TXNWATCH_ARCHIVE_JOB_LOG_LEVEL",
    "log_format": "TXNWATCH_ARCHIVE_JOB_LOG_FORMAT",
}
_one_at_a_time = threading.Lock()
_said_unavailable: list[bool] = [False]


def unavailable() -> str | None:
    """Why no archive job can run in this install (pyarrow, the archive extra, is missing), or None.
    Asked without importing pyarrow (txnwatch.core.extras.require looks the module up only)."""
    from txnwatch.core.extras import MissingExtra, require

    try:
        require("pyarrow")
    except MissingExtra as exc:
        return str(exc)
    return None


def say_if_unavailable(settings: Settings) -> bool:
    """Once per process (at the daemon's start, and else at the first job): the archive cannot be written here,
    and what that means for the database.  True if it said so now."""
    why = unavailable()
    if why is None or _said_unavailable[0]:
        return False
    _said_unavailable[0] = True
    log.warning("retention: the archive at %s is not written: %s. Until then history and the transition stream "
                "stay in the database (nothing is purged past retention.days); polling, alerting, the API and the "
                "console are unaffected", settings.retention.archive_dir, why)
    return True


class Children:
    """The archive child of one daemon: :meth:`stop` (a service's stop, the first of the daemon's) ends the
    running one and refuses new ones until :meth:`start`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: subprocess.Popen[bytes] | None = None
        self._stopped = False

    @property
    def stopped(self) -> bool:
        return self._stopped

    def start(self) -> None:
        with self._lock:
            self._stopped = False

    def spawn(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes] | None:
        """The child, or None once stopped (under the lock: no child starts after :meth:`stop` returned)."""
        with self._lock:
            if self._stopped:
                return None
            self._running = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
            return self._running

    def finished(self, child: subprocess.Popen[bytes]) -> None:
        with self._lock:
            if self._running is child:
                self._running = None

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        with self._lock:
            self._stopped = True
            child = self._running
        if child is not None:
            log.info("archive job: stopping its child (pid %d) with the daemon; it runs again after the next start",
                     child.pid)
            end(child, grace_s)


def end(child: subprocess.Popen[bytes], grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM, then SIGKILL after ``grace_s``; returns once the child is gone (reaped)."""
    if child.poll() is not None:
        return
    child.terminate()
    try:
        child.wait(grace_s)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


#: The children of a process that was handed none (tools, tests calling :func:`run_in_child` directly).
DEFAULT_CHILDREN = Children()


def run_in_child(job: str, settings: Settings, children: Children | None = None) -> bool:
    """Run ``job`` in a child process; True when it archived (and purged) without error.  Without pyarrow no
    child is started (it could only fail): False, said once (:func:`say_if_unavailable`).  ``children``: the
    daemon's (its stop ends the child), else :data:`DEFAULT_CHILDREN`."""
    children = children or DEFAULT_CHILDREN
    if job not in JOBS:
        raise ValueError(f"unknown archive job {job!r}")
    if unavailable() is not None:
        say_if_unavailable(settings)
        return False
    env = dict(os.environ)
    env.update({
        _ENV["database_url"]: settings.database_url,
        _ENV["archive_dir"]: settings.retention.archive_dir,
        _ENV["retention_days"]: repr(settings.retention.days),
        _ENV["archive_days"]: "" if settings.retention.archive_days is None else repr(settings.retention.archive_days),
        _ENV["hot_minutes"]: repr(settings.transaction_log.hot_transitions_minutes),
        _ENV["downsample_after_hours"]: repr(settings.retention.downsample_after_hours),
        _ENV["downsample_minutes"]: repr(settings.retention.downsample_minutes),
        _ENV["log_level"]: settings.log_level,
        _ENV["log_format"]: settings.log_format,
    })
    env[_PARENT_ENV] = str(os.getpid())
    with _one_at_a_time:
        try:
            child = children.spawn([sys.executable, "-m", "txnwatch.store.archive_job", job], env)
        except (OSError, subprocess.SubprocessError) as exc:
            log.error("archive job %s could not run (%s); history stays in the database", job, exc)
            return False
        if child is None:  # the daemon is stopping
            return False
        try:
            returncode = child.wait(CHILD_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            end(child)
            log.error("archive job %s did not finish within %.0f s and was stopped; nothing more was purged",
                      job, CHILD_TIMEOUT_S)
            return False
        finally:
            children.finished(child)
    if returncode != 0 and children.stopped:
        log.info("archive job %s was stopped with the daemon (exit %s); history stays in the database until "
                 "it runs again", job, returncode)
    elif returncode != 0:
        log.error("archive job %s failed (exit %s); history stays in the database until it succeeds",
                  job, returncode)
    return returncode == 0


def _history(database_url: str, archive_dir: str, retention_days: float, archive_days: float | None,
             downsample: tuple[float, float] = (1.0, 0.0)) -> None:
    """``downsample``: (after hours, window minutes) of store.downsample; samples are thinned once archived."""
    from txnwatch.store.archive import export_history, prune_archive
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.downsample import downsample as thin
    from txnwatch.store.retention import purge

    engine = make_engine(database_url)
    try:
        export_history(engine, archive_dir)
        now = datetime.now(timezone.utc)
        purge(make_sessionmaker(engine), now, retention_days)
        thin(make_sessionmaker(engine), now, timedelta(hours=downsample[0]), timedelta(minutes=downsample[1]))
    finally:
        engine.dispose()
    if archive_days is not None:
        try:
            prune_archive(archive_dir, archive_days)
        except Exception:
            log.exception("archive retention on %s failed; retrying at the next run", archive_dir)


def _transitions(database_url: str, archive_dir: str, hot_minutes: float) -> None:
    from txnwatch.store.archive import export_transitions_then_purge
    from txnwatch.store.db import make_engine, make_sessionmaker

    engine = make_engine(database_url)
    try:
        export_transitions_then_purge(engine, make_sessionmaker(engine), archive_dir, timedelta(minutes=hot_minutes))
    finally:
        engine.dispose()


def main(argv: list[str]) -> int:
    from txnwatch.core import logs
    from txnwatch.core.children import die_with_parent
    from txnwatch.core.extras import MissingExtra, require

    parent = os.environ.get(_PARENT_ENV, "")
    if parent.isdigit():
        die_with_parent(int(parent))
    logs.configure(os.environ.get(_ENV["log_level"], "INFO"), os.environ.get(_ENV["log_format"], "text"))
    if len(argv) != 1 or argv[0] not in JOBS:
        log.error("usage: python -m txnwatch.store.archive_job %s", "|".join(JOBS))
        return 2
    job = argv[0]
    what = "history" if job == "history" else "the transition stream"
    try:
        require("pyarrow")
    except MissingExtra as exc:
        log.error("archiving %s: %s; it stays in the database until it is installed", what, exc)
        return 5
    url, archive_dir = os.environ[_ENV["database_url"]], os.environ[_ENV["archive_dir"]]
    try:
        if job == "history":
            archive_days = os.environ.get(_ENV["archive_days"]) or None
            _history(url, archive_dir, float(os.environ[_ENV["retention_days"]]),
                     float(archive_days) if archive_days is not None else None,
                     (float(os.environ.get(_ENV["downsample_after_hours"]) or 1),
                      float(os.environ.get(_ENV["downsample_minutes"]) or 0)))
        else:
            _transitions(url, archive_dir, float(os.environ[_ENV["hot_minutes"]]))
    except Exception:
        log.exception("archiving %s to %s failed; it stays in the database until it succeeds", what, archive_dir)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
