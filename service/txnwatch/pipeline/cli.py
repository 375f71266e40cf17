"""`txnwatch pipeline …`: run the rollups, export the archive, synthesise history."""

from __future__ import annotations

import sys
import time
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from txnwatch.core import exitcodes
from txnwatch.core.config import ConfigError, Settings, load_settings
from txnwatch.core.extras import require

app = typer.Typer(help="PySpark rollups over the Parquet history archive.", no_args_is_help=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help="txnwatch YAML config file.")]
ArchiveOpt = Annotated[str | None, typer.Option(
    "--archive", help="Archive root: local path or filesystem URI (default: retention.archive_dir).")]


def _settings(path: Path | None) -> Settings:
    try:
        return load_settings(path)
    except ConfigError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


def _say(message: str) -> None:
    typer.echo(message, err=True)


def parse_conf(items: list[str]) -> dict[str, str]:
    """`--conf KEY=VALUE` pairs, as spark-submit takes them: the Helm chart passes the driver's address and
    ports and the operator's Spark properties this way. Only `spark.*` keys: anything else is a typo Spark
    would ignore in silence."""
    conf: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key.startswith("spark.") or key == "spark.":
            raise ValueError(f"--conf {item!r}: expected spark.KEY=VALUE (e.g. spark.executor.memory=2g)")
        conf[key] = value
    return conf


@app.command()
def run(
    since: Annotated[str | None, typer.Option(help="First UTC day (YYYY-MM-DD); default two days ago.")] = None,
    until: Annotated[str | None, typer.Option(help="Last UTC day, inclusive; default today.")] = None,
    master: Annotated[str | None, typer.Option(
        help="Spark master: local[*] (default), spark://host:7077, k8s://https://…; omit under spark-submit.")] = None,
    archive: ArchiveOpt = None,
    config: ConfigOpt = None,
    prefix_rule: Annotated[str, typer.Option(
        help="Transactional-id prefix: last-dash, none, first:N, regex:PAT.")] = "last-dash",
    top: Annotated[int, typer.Option(help="Offenders kept per cluster, day and kind.")] = 10,
    output: Annotated[str | None, typer.Option(
        help="Where rollup Parquet goes (default <archive>/_rollups).")] = None,
    no_db: Annotated[bool, typer.Option("--no-db", help="Write Parquet only; do not load the database.")] = False,
    export_first: Annotated[bool, typer.Option("--export/--no-export",
                                               help="Archive new history rows before computing.")] = True,
    driver_memory: Annotated[str, typer.Option(help="Spark driver heap; keep it under the pod's memory limit.")] = "1g",
    conf: Annotated[list[str] | None, typer.Option(
        "--conf", help="Spark property KEY=VALUE (repeatable), e.g. spark.executor.memory=2g.")] = None,
) -> None:
    """Compute rollups for whole UTC days, write them as Parquet and load them into the database."""
    require("pyspark", "pyarrow")
    from txnwatch.pipeline.jobs import RollupOptions
    from txnwatch.pipeline.prefix import validate
    from txnwatch.pipeline.progress import Progress
    from txnwatch.pipeline.run import Window, run_pipeline
    from txnwatch.pipeline.session import JavaMissing, build_session, check_java, submitted

    settings = _settings(config)
    try:
        default = Window.default()
        window = Window(date.fromisoformat(since) if since else default.since,
                        date.fromisoformat(until) if until else default.until)
        validate(prefix_rule)
        spark_conf = parse_conf(conf or [])
    except ValueError as exc:
        _say(f"error: {exc}")
        raise typer.Exit(2) from None
    if window.since > window.until:
        _say("error: --since is after --until")
        raise typer.Exit(2)
    try:
        check_java()
    except JavaMissing as exc:
        _say(f"error: {exc}")
        raise typer.Exit(exitcodes.MISSING_DEPENDENCY) from None
    from txnwatch.store.archive import export_history
    from txnwatch.store.db import make_engine

    progress = Progress()
    target = archive or settings.retention.archive_dir
    engine = None if no_db and not export_first else make_engine(settings.database_url)
    try:
        if export_first and engine is not None:
            with progress.stage(f"exporting new history to {target}") as figures:
                figures.update({r.table: f"{r.rows:,}" for r in export_history(engine, target)})
        shown = master or ("as submitted" if submitted() else "local[*]")
        with progress.stage(f"starting Spark ({shown})"):
            spark = build_session(master, extra=spark_conf, driver_memory=driver_memory)
        try:
            run_pipeline(spark, target, window, None if no_db else engine,
                         RollupOptions(prefix_rule, top), output, progress)
        finally:
            spark.stop()
    finally:
        if engine is not None:
            engine.dispose()


@app.command()
def export(
    archive: ArchiveOpt = None,
    config: ConfigOpt = None,
    chunk_rows: Annotated[int, typer.Option(help="Rows per database read.")] = 50_000,
) -> None:
    """Append history rows not yet archived to the Parquet archive (incremental, safe to re-run)."""
    require("pyarrow")
    from txnwatch.store.archive import export_history
    from txnwatch.store.db import make_engine

    settings = _settings(config)
    engine = make_engine(settings.database_url)
    target = archive or settings.retention.archive_dir
    start = time.perf_counter()
    try:
        for result in export_history(engine, target, chunk_rows=chunk_rows):
            orphans = f", {result.removed_orphans} orphan files removed" if result.removed_orphans else ""
            _say(f"{result.table}: {result.rows:,} rows in {result.files} files{orphans}")
    finally:
        engine.dispose()
    _say(f"exported to {target} in {time.perf_counter() - start:.1f}s")


@app.command()
def synth(
    rows: Annotated[int, typer.Option(min=0, help="Total rows over all history tables.")],
    out: Annotated[str, typer.Option(help="Archive root to write (appends if it exists).")],
    days: Annotated[int, typer.Option(min=1, help="Days of history, ending today.")] = 7,
    clusters: Annotated[int, typer.Option(min=1, help="Number of synthetic clusters.")] = 2,
) -> None:
    """Write synthetic history in archive format, for tests and benchmarks."""
    require("pyarrow")
    from txnwatch.pipeline.synth import synthesize

    start = time.perf_counter()
    written = synthesize(out, rows, days, clusters)
    _say(", ".join(f"{k} {v:,}" for k, v in written.items()))
    _say(f"{sum(written.values()):,} rows to {out} in {time.perf_counter() - start:.1f}s")


if __name__ == "__main__":  # pragma: no cover
    app(sys.argv[1:])
