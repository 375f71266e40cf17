"""The daemon's archive jobs (history, then the transition stream) run in a short-lived child process.

Why a child: writing Parquet needs pyarrow, and once imported pyarrow stays in a process for good
(~45 MB of resident memory, a third of an idle daemon's). The jobs run hourly and (transitions) every
10 minutes or 20,000 staged rows (txnwatch.store.archive_pacing), for a second or two; the daemon keeps its
memory for what it does all the time (issue 18: idle RSS <= 100 MB). One job at a time: both rewrite the archive's manifest.

The child gets the database URL through its environment (never its command line, which ``ps``
shows), does exactly what the in-process job did — archive first, purge only what is archived —
and reports success by its exit status. Its log lines go to the daemon's stderr.

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


def run_in_child(job: str, settings: Settings) -> bool:
    """Run ``job`` in a child process; True when it archived (and purged) without error."""
    if job not in JOBS:
        raise ValueError(f"unknown archive job {job!r}")
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
    with _one_at_a_time:
        try:
            done = subprocess.run([sys.executable, "-m", "txnwatch.store.archive_job", job], env=env,
                                  stdin=subprocess.DEVNULL, timeout=CHILD_TIMEOUT_S, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            log.error("archive job %s could not run (%s); history stays in the database", job, exc)
            return False
    if done.returncode != 0:
        log.error("archive job %s failed (exit %s); history stays in the database until it succeeds",
                  job, done.returncode)
    return done.returncode == 0


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
    from txnwatch.core.extras import MissingExtra, require

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
