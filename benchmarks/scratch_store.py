"""A scratch SQLite store for the benchmarks that time the store's own paths (txnlog_lab, txnlog_commits,
txnlog_index): migrated, with one cluster registered as the daemon has it at start, removed when the process exits.

txnwatch is imported only when :func:`scratch_store` is called, so a benchmark's child process measures whichever
txnwatch its ``sys.path`` puts first (a ``--baseline`` tree or this checkout); this module changes no path."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from typing import Any


def scratch_store(prefix: str, cluster: str = "bench", bootstrap: str = "bench:9092") -> tuple[Any, Any, int]:
    """(engine, sessionmaker, the cluster's row id) of a new migrated SQLite file under a temporary directory."""
    from datetime import UTC, datetime

    from txnwatch.store.clusters import register_clusters
    from txnwatch.store.db import make_engine, make_sessionmaker
    from txnwatch.store.migrate import upgrade

    directory = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)  # a run's database (up to ~100 MB) goes with it
    url = f"sqlite:///{directory}/bench.db"
    upgrade(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        cluster_id = register_clusters(session, {cluster: bootstrap}, datetime.now(UTC))[cluster]
    return engine, sessions, cluster_id
