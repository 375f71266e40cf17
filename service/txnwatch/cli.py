"""The `txnwatch` command: run, migrate, config check, hanging, lab, pipeline, demo.

Imports are deferred into the commands so `txnwatch --help` stays instant and a
missing optional piece (Java for the pipeline, say) only matters where it is used.
Every expected failure becomes one line on stderr and a documented exit code:
1 = something was found / the operation failed, 2 = bad configuration or arguments.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, NoReturn, Optional

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False,
                  help="Observability and alerting for Apache Kafka transactions.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect and validate configuration.")
app.add_typer(config_app, name="config")


def _mount_subapps() -> None:
    """Sub-apps live beside their subject; their modules import nothing heavy at the top."""
    from txnwatch.lab.cli import app as lab_app
    from txnwatch.pipeline.cli import app as pipeline_app

    app.add_typer(lab_app, name="lab", help="Real local Kafka clusters, workloads and fault injection.")
    app.add_typer(pipeline_app, name="pipeline", help="PySpark rollups over the Parquet history archive.")


_mount_subapps()

ConfigOption = Annotated[
    Optional[Path],
    typer.Option("--config", "-c", envvar="TXNWATCH_CONFIG", help="YAML config file (TXNWATCH_* env vars override it)."),
]


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"txnwatch: {message}", err=True)
    raise typer.Exit(code)


def _settings(path: Path | None, **overrides: object):  # type: ignore[no-untyped-def]
    from txnwatch.config import ConfigError, load_settings

    try:
        return load_settings(path, **overrides)
    except ConfigError as exc:
        fail(f"invalid configuration: {exc}")


@config_app.command("check")
def config_check(file: Annotated[Path, typer.Argument(help="Config file to validate.")]) -> None:
    """Validate a config file (with TXNWATCH_* env overrides applied) and print a summary."""
    settings = _settings(file)
    typer.echo(f"{file}: OK — {len(settings.clusters)} cluster(s), database {settings.database_url.split(':', 1)[0]}, "
               f"poll every {settings.poll_interval_seconds:g}s")


@app.command()
def migrate(config: ConfigOption = None,
            revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Upgrade the configured database schema (Alembic)."""
    from sqlalchemy.exc import SQLAlchemyError

    from txnwatch.store.migrate import current, upgrade

    settings = _settings(config)
    try:
        upgrade(settings.database_url, revision)
        typer.echo(f"database at revision {current(settings.database_url)}")
    except SQLAlchemyError as exc:
        fail(f"migration failed: {exc.__class__.__name__}: {str(exc).splitlines()[0]}", 1)


@app.command()
def run(config: ConfigOption = None,
        host: Annotated[Optional[str], typer.Option(help="Override api.host.")] = None,
        port: Annotated[Optional[int], typer.Option(help="Override api.port.")] = None) -> None:
    """Run the daemon: collector, alerting, REST API and /metrics."""
    from txnwatch.server import StartupError, serve

    settings = _settings(config)
    if host or port:
        api = settings.api.model_copy(update={k: v for k, v in (("host", host), ("port", port)) if v})
        settings = settings.model_copy(update={"api": api})
    try:
        serve(settings)
    except StartupError as exc:
        fail(str(exc), exc.exit_code)


@app.command()
def hanging(
    bootstrap_server: Annotated[Optional[str], typer.Option("--bootstrap-server", "-b",
                                                            help="host:port[,host:port]; or use --config/--cluster.")] = None,
    config: ConfigOption = None,
    cluster: Annotated[Optional[str], typer.Option(help="Cluster name from the config (security settings included).")] = None,
    output: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    max_transaction_timeout_ms: Annotated[Optional[int], typer.Option(
        min=0, help="Override the brokers' transaction.max.timeout.ms (default: asked from the cluster).")] = None,
) -> None:
    """Find hanging transactions once, like `kafka-transactions.sh find-hanging`, checking every partition.

    Exit codes: 0 none, 1 hanging transactions found, 2 bad arguments, 3 cluster unreachable.
    """
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
    from txnwatch.oneshot import run as run_oneshot

    if output not in ("table", "json"):
        fail(f"--format must be table or json, not {output!r}")
    if bootstrap_server:
        from txnwatch.config import ClusterConfig

        from pydantic import ValidationError

        try:
            cfg = ClusterConfig(name="cli", bootstrap_servers=bootstrap_server)
        except ValidationError as exc:
            fail(f"--bootstrap-server: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")
    else:
        settings = _settings(config)
        matches = [c for c in settings.clusters if cluster is None or c.name == cluster]
        if len(matches) != 1:
            fail("give --bootstrap-server, or --config with exactly one cluster (or --cluster NAME); known: "
                 + (", ".join(c.name for c in settings.clusters) or "none"))
        cfg = matches[0]
    with ClusterConnection(ClusterConnectionSettings.from_config(cfg)) as connection:
        code, text = run_oneshot(connection, output, max_transaction_timeout_ms)
    typer.echo(text, err=code == 3)
    raise typer.Exit(code)


@app.command()
def demo(port: Annotated[int, typer.Option(help="API port.")] = 8080,
         var_dir: Annotated[Path, typer.Option("--dir", help="Where the demo keeps its DB and lab.")] = Path("var"),
         brokers: Annotated[int, typer.Option(min=1, max=5, help="Lab brokers.")] = 3) -> None:
    """Start a lab Kafka cluster with the demo workload (a hanging transaction, an LSO stall) and the daemon."""
    from txnwatch.demo import run_demo
    from txnwatch.lab.errors import LabError
    from txnwatch.server import StartupError

    try:
        run_demo(port, var_dir.resolve(), brokers)
    except LabError as exc:
        fail(str(exc), 1)
    except StartupError as exc:
        fail(str(exc), exc.exit_code)


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
