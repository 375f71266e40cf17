"""One pipeline run: archive → rollups → Parquet → database.

The window is whole UTC days, ``since`` to ``until`` inclusive.  Recomputing a
window from the archive (instead of folding new rows into old rollups) is what
makes late data and repeated runs harmless: the result depends only on what the
archive holds for those days.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import SparkSession
from sqlalchemy import Engine

from txnwatch.pipeline.jobs import RollupOptions, all_rollups
from txnwatch.pipeline.progress import Progress
from txnwatch.pipeline.source import load_archive
from txnwatch.store.archive import open_archive
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.rollups import replace_window

ROLLUPS_DIR = "_rollups"


@dataclass(frozen=True)
class Window:
    since: date
    until: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.since, time(), timezone.utc)

    @property
    def end(self) -> datetime:
        return datetime.combine(self.until + timedelta(days=1), time(), timezone.utc)

    @classmethod
    def default(cls, today: date | None = None, days: int = 3) -> Window:
        """Today and the two days before: yesterday's late rows are folded in by tomorrow's run."""
        today = today or datetime.now(timezone.utc).date()
        return cls(today - timedelta(days=days - 1), today)


def _write_parquet(table: pa.Table, uri: str) -> None:
    """Rollups are small and already on the driver for the database, so pyarrow writes them:
    one Spark job fewer per rollup, and the same filesystem code as the archive."""
    fs, root = open_archive(uri)
    days = pc.strftime(table.column("period_start"), format="%Y-%m-%d") if table.num_rows else pa.array([], pa.string())
    ds.write_dataset(table.append_column("date", days), root, filesystem=fs, format="parquet",
                     partitioning=ds.partitioning(pa.schema([("cluster", pa.string()), ("date", pa.string())]),
                                                  flavor="hive"),
                     basename_template="part-{i}.parquet", existing_data_behavior="delete_matching")


def run_pipeline(spark: SparkSession, archive_uri: str, window: Window, engine: Engine | None = None,
                 options: RollupOptions = RollupOptions(), output_uri: str | None = None,
                 progress: Progress | None = None) -> dict[str, list[dict[str, Any]]]:
    """Compute, write and load the rollups of ``window``; returns them (small) as plain rows."""
    progress = progress or Progress(quiet=True)
    with progress.stage(f"reading archive {archive_uri} for {window.since} .. {window.until}") as figures:
        tables, counts = load_archive(spark, archive_uri, window.since, window.until)
        figures.update({name: f"{n:,}" for name, n in counts.items()})
    rollups = all_rollups(tables, options)
    out = output_uri or posixpath.join(archive_uri, ROLLUPS_DIR)
    results: dict[str, list[dict[str, Any]]] = {}
    for name, df in rollups.items():
        with progress.stage(f"rollup {name}") as figures:
            table = df.where((df["period_start"] >= window.start) & (df["period_start"] < window.end)).toArrow()
            _write_parquet(table, posixpath.join(out, name))
            results[name] = table.to_pylist()
            figures["rows"] = f"{len(results[name]):,}"
    if engine is not None:
        with progress.stage("loading rollups into the database") as figures:
            with make_sessionmaker(engine).begin() as session:
                loaded = replace_window(session, window.start, window.end, results)
            figures.update({name: f"{n:,}" for name, n in loaded.items()})
    return results
