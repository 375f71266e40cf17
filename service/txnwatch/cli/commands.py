"""The `txnwatch` command: run, migrate, config check, hanging, abort, sessions end, lab, pipeline, demo.

Imports are deferred into the commands so `txnwatch --help` stays instant and a
missing optional piece (Java for the pipeline, say) only matters where it is used.
The lab and pipeline sub-commands are loaded only when named (``txnwatch run`` never imports
the lab's CLI or PySpark). Every expected failure becomes one line on stderr and a documented
exit code, listed in txnwatch.core.exitcodes and README.md.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from txnwatch import __version__
from txnwatch.cli import daemon
from txnwatch.core import exitcodes

if TYPE_CHECKING:
    from txnwatch.core.config import Settings

def _lab_app() -> Any:
    from txnwatch.lab.cli import app

    return app


def _pipeline_app() -> Any:
    from txnwatch.pipeline.cli import app

    return app


#: name -> (what imports the sub-command's typer app, one-line help shown by `txnwatch --help`).  Plain imports in
#: functions, not import_module of a name: the import-boundary test (and a reader) sees cli's arrows to lab/ and
#: pipeline/, and nothing is imported before the sub-command is named.
LAZY_SUBCOMMANDS: dict[str, tuple[Callable[[], Any], str]] = {
    "lab": (_lab_app, "Real local Kafka clusters, workloads and fault injection."),
    "pipeline": (_pipeline_app, "PySpark rollups over the Parquet history archive."),
}


class _LazyGroup(TyperGroup):
    """Imports a sub-command's module only when that sub-command is run (or its own help is asked for).

    Listing the commands (`txnwatch --help`) gets a placeholder carrying the help line, so neither
    the lab's CLI nor the pipeline's is imported by `txnwatch run` or `txnwatch --help`.
    """

    def list_commands(self, ctx: Any) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_SUBCOMMANDS])

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in LAZY_SUBCOMMANDS:
            help_text = LAZY_SUBCOMMANDS[cmd_name][1]
            return TyperGroup(name=cmd_name, help=help_text, short_help=help_text)
        return super().get_command(ctx, cmd_name)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] in LAZY_SUBCOMMANDS:
            load_app, help_text = LAZY_SUBCOMMANDS[args[0]]
            command = typer.main.get_command(load_app())
            command.name, command.short_help = args[0], help_text
            return args[0], command, args[1:]
        return super().resolve_command(ctx, args)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"txnwatch {__version__}")
        raise typer.Exit()


# Full help at any width: rich wraps option help instead of cutting it at 80 columns.
CONTEXT = {"max_content_width": 120, "help_option_names": ["-h", "--help"]}
app = typer.Typer(cls=_LazyGroup, no_args_is_help=True, add_completion=False, context_settings=CONTEXT,
                  rich_markup_mode="markdown",
                  help="Observability and alerting for Apache Kafka transactions.")
config_app = typer.Typer(no_args_is_help=True, help="Inspect and validate configuration.", context_settings=CONTEXT)
app.add_typer(config_app, name="config")
sessions_app = typer.Typer(no_args_is_help=True, context_settings=CONTEXT,
                           help="Console sessions: end them without rotating the read token.")
app.add_typer(sessions_app, name="sessions")


@app.callback()
def _root(version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                                help="Print the version and exit.")] = False) -> None:
    """Observability and alerting for Apache Kafka transactions."""

ConfigOption = Annotated[
    Path | None,
    typer.Option("--config", "-c", envvar="TXNWATCH_CONFIG", help="YAML config file (TXNWATCH_* env vars override it)."),
]


# One line on stderr and an exit code (SystemExit, which click passes through): shared with `txnwatch run`'s
# fast path in txnwatch.cli.main, which never imports typer.
fail = daemon.fail
_settings = daemon.load


def _usable_database(settings: Settings, origin: str) -> None:
    """What can be known about the database without connecting (txnwatch.store.db.database_problems), as
    config errors: one line each, exit 2."""
    from txnwatch.store.db import database_problems

    problems = database_problems(settings.database_url)
    for problem in problems:
        typer.echo(f"txnwatch: {origin}: database_url: {problem}", err=True)
    if problems:
        raise typer.Exit(exitcodes.USAGE)


@config_app.command("check")
def config_check(file: Annotated[Path, typer.Argument(help="Config file to validate.")]) -> None:
    """Validate a config file (with TXNWATCH_* env overrides applied) and print a summary."""
    from txnwatch.core.redact import redact

    settings = _settings(file)
    _usable_database(settings, str(file))
    typer.echo(f"{file}: OK — {len(settings.clusters)} cluster(s), database {redact(settings.database_url)}, "
               f"poll every {settings.poll_interval_seconds:g}s")


@app.command()
def migrate(config: ConfigOption = None,
            revision: Annotated[str, typer.Option(help="Target revision.")] = "head") -> None:
    """Upgrade the configured database schema (Alembic)."""
    from txnwatch.core.logbudget import describe
    from txnwatch.store.migrate import current, upgrade

    settings = _settings(config)
    _usable_database(settings, str(config or "configuration"))
    try:
        upgrade(settings.database_url, revision)
        typer.echo(f"database at revision {current(settings.database_url)}")
    except Exception as exc:  # any failure is the operator's to read in one line, not a traceback
        fail(f"migration failed: {describe(exc)}", exitcodes.FOUND_OR_FAILED)


@sessions_app.command("end")
def sessions_end(config: ConfigOption = None) -> None:
    """End every console session signed in so far, on every worker and replica, as POST
    /api/v1/admin/console-sessions/end does: bearer tokens (scrapers, API clients) keep working, and the read
    token's holders may sign in again. Uses the configured database (it needs no admin token: access to the
    database is the credential) and writes an admin_audit row (actor cli:database, your user@host) in the same
    transaction.

    Exit codes: 0 done, 1 the database could not be written (nothing was ended), 2 bad configuration.
    """
    from sqlalchemy.orm import Session

    from txnwatch.cli.abort import operator
    from txnwatch.remedy import guard
    from txnwatch.remedy.audit import Audit, AuditUnwritable, Who
    from txnwatch.remedy.console_sessions import end_every_session
    from txnwatch.store.db import make_engine

    settings = _settings(config)
    _usable_database(settings, str(config or "configuration"))
    engine = make_engine(settings.database_url)
    try:
        ended = end_every_session(Audit(lambda: Session(engine)), Who(f"cli:{guard.OWN_DATABASE_ACCESS}", operator()))
    except AuditUnwritable as exc:
        fail(f"no console session was ended: the database could not be written ({exc.reason})",
             exitcodes.FOUND_OR_FAILED)
    finally:
        engine.dispose()
    typer.echo(f"{ended.outcome} (audit row {ended.audit_id})")


@app.command()
def run(config: ConfigOption = None,
        host: Annotated[str | None, typer.Option(help="Override api.host.")] = None,
        port: Annotated[int | None, typer.Option(help="Override api.port.")] = None,
        workers: Annotated[int | None, typer.Option(min=0, max=32, help=(
            "Override api.workers: serve the API and /metrics from this many processes of their own "
            "(0: in the daemon's process)."))] = None) -> None:
    """Run the daemon: collector, alerting, REST API and /metrics."""
    daemon.run_daemon(config, host, port, workers)


@app.command()
def hanging(
    bootstrap_server: Annotated[str | None, typer.Option("--bootstrap-server", "-b",
                                                            help="host:port[,host:port]; or use --config/--cluster.")] = None,
    config: ConfigOption = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster name from the config (security settings included).")] = None,
    output: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    max_transaction_timeout_ms: Annotated[int | None, typer.Option(
        min=0, help="Override the brokers' transaction.max.timeout.ms (default: asked from the cluster).")] = None,
) -> None:
    """Find hanging transactions once, like `kafka-transactions.sh find-hanging`, checking every partition.

    Exit codes: 0 none, 1 hanging transactions found, 2 bad arguments, 3 cluster unreachable.
    """
    from txnwatch.cli.hanging import run as run_oneshot
    from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings

    if output not in ("table", "json"):
        fail(f"--format must be table or json, not {output!r}")
    if bootstrap_server:
        cfg = _bootstrap_cluster(bootstrap_server)
    else:
        settings = _settings(config)
        matches = [c for c in settings.clusters if cluster is None or c.name == cluster]
        if len(matches) != 1:
            fail("give --bootstrap-server, or --config with exactly one cluster (or --cluster NAME); known: "
                 + (", ".join(c.name for c in settings.clusters) or "none"))
        cfg = matches[0]
    with ClusterConnection(ClusterConnectionSettings.from_config(cfg)) as connection:
        code, text = run_oneshot(connection, output, max_transaction_timeout_ms,
                                 ",".join(cfg.bootstrap_servers))
    typer.echo(text, err=code == 3)
    raise typer.Exit(code)


@app.command()
def abort(
    topic: Annotated[str | None, typer.Option(help="Topic of the partition holding the open transaction.")] = None,
    partition: Annotated[int | None, typer.Option(min=0, help="Partition holding the open transaction.")] = None,
    transactional_id: Annotated[str | None, typer.Option(
        "--transactional-id", help="Instead of a partition: the transactional id whose ongoing transaction to "
                                   "abort, on every partition it spans (Kafka 4.1+, as kafka-transactions.sh "
                                   "force-terminates one; this also fences the id's producer).")] = None,
    bootstrap_server: Annotated[str | None, typer.Option(
        "--bootstrap-server", "-b", help="Brokers as Kafka's own tool takes them (host:port, comma "
                                         "separated): no config file needed. Or use --config/--cluster.")] = None,
    config: ConfigOption = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster name from the config (needed if it has several).")] = None,
    producer_id: Annotated[int | None, typer.Option(min=0, help="Producer id of the open transaction.")] = None,
    producer_epoch: Annotated[int | None, typer.Option(min=0, max=32767, help="Its producer epoch.")] = None,
    coordinator_epoch: Annotated[int | None, typer.Option(
        min=0, help="Coordinator epoch for the marker (default: the one the partition leader reports).")] = None,
    start_offset: Annotated[int | None, typer.Option(
        min=0, help="Instead of producer id and epoch: the offset where the open transaction starts (as "
                    "`txnwatch hanging`, /api/v1/hanging and the console show it); the partition leader "
                    "names its producer.")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Write the ABORT marker. Without it: a dry run that "
                                                            "only checks and says what it would do.")] = False,
    token: Annotated[str | None, typer.Option(envvar="TXNWATCH_ADMIN_TOKEN", show_envvar=True,
                                                 help="The admin token (api.admin_token) for --cluster/--config; "
                                                      "prefer the env var.")] = None,
) -> None:
    """Abort an open transaction on a partition (WriteTxnMarkers), as `kafka-transactions.sh abort` does, or by
    its transactional id (--transactional-id), as Kafka 4.1's `kafka-transactions.sh forceTerminateTransaction`
    does: refused on clusters older than 4.1, where the partition abort is the way.

    With --bootstrap-server, like Kafka's tool: no config file, your own Kafka access; audited in the
    database when one is configured (--config, TXNWATCH_CONFIG or TXNWATCH_DATABASE_URL). With a
    configured cluster (--config/--cluster) it uses txnwatch's credentials, so it passes the API's
    guard (api.admin_enabled and the admin token) and writes the same audit row as POST
    /api/v1/admin/abort. A dry run by default: add --execute.

    The audit is written ahead: the intent before Kafka is asked, the outcome after; if the intent cannot
    be written, nothing is sent.

    Exit codes: 0 done (or would be done), 1 Kafka refused (e.g. no such open transaction),
    2 bad arguments or admin actions disabled or wrong token, 3 cluster unreachable, 6 the audit could
    not record the intent (nothing was sent to Kafka).
    """
    import os

    from sqlalchemy.orm import Session

    from txnwatch.cli import abort as abort_cli
    from txnwatch.core.commands import TRANSACTIONAL_ID_MAX
    from txnwatch.core.config import CONFIG_ENV
    from txnwatch.remedy import guard
    from txnwatch.remedy.audit import Audit, Who
    from txnwatch.remedy.commands import AbortById, AbortPartition
    from txnwatch.runtime.wiring import ADMIN_CALLS
    from txnwatch.store.db import make_engine

    if transactional_id is not None:
        if any(v is not None for v in (topic, partition, producer_id, producer_epoch, coordinator_epoch, start_offset)):
            fail("--transactional-id names the transaction alone: no --topic, --partition, --producer-id, "
                 "--producer-epoch, --coordinator-epoch or --start-offset with it")
        if not transactional_id or len(transactional_id) > TRANSACTIONAL_ID_MAX:
            fail(f"--transactional-id: 1 to {TRANSACTIONAL_ID_MAX} characters")
    else:
        if topic is None or partition is None:
            fail("give --topic and --partition (or --transactional-id)")
        if (producer_id is None) != (producer_epoch is None) or (producer_id is None and start_offset is None):
            fail("give --start-offset, or --producer-id and --producer-epoch")
        if producer_id is not None and start_offset is not None:
            fail("give --start-offset or --producer-id/--producer-epoch, not both")
    database_configured = bool(config or os.environ.get(CONFIG_ENV) or os.environ.get("TXNWATCH_DATABASE_URL"))
    if bootstrap_server:
        cfg = _bootstrap_cluster(bootstrap_server)
        settings = _settings(config) if database_configured else None
        credential = guard.OWN_KAFKA_ACCESS
    else:
        settings = _settings(config)
        try:
            credential = guard.check_admin(settings, token)
        except guard.AdminRefused as exc:
            fail(f"{exc}{'' if exc.disabled else ' (give --token or TXNWATCH_ADMIN_TOKEN)'}; or give "
                 "--bootstrap-server to use your own Kafka access, as kafka-transactions.sh does")
        matches = [c for c in settings.clusters if cluster is None or c.name == cluster]
        if len(matches) != 1:
            fail("name the cluster with --cluster, or give --bootstrap-server; known: "
                 + (", ".join(c.name for c in settings.clusters) or "none"))
        cfg = matches[0]
    command: AbortPartition | AbortById
    if transactional_id is not None:
        command = AbortById(cfg.name, transactional_id)
    else:
        assert topic is not None and partition is not None  # checked above
        command = AbortPartition(cfg.name, topic, partition, producer_id, producer_epoch, coordinator_epoch,
                                 start_offset)
    engine = make_engine(settings.database_url) if settings is not None else None
    try:
        report = abort_cli.run(cfg, command, execute=execute, calls=ADMIN_CALLS,
                               audit=Audit(lambda: Session(engine)) if engine is not None else None,
                               who=Who(f"cli:{credential}", abort_cli.operator()),
                               now=lambda: datetime.now(timezone.utc))
    finally:
        if engine is not None:
            engine.dispose()
    if report.text:
        typer.echo(report.text)
    for warning in report.warnings:
        typer.echo(warning, err=True)
    raise typer.Exit(report.exit_code)


def _bootstrap_cluster(bootstrap_server: str) -> Any:
    """A ClusterConfig from --bootstrap-server alone (named after it, as the audit row and output show it)."""
    import re

    from pydantic import ValidationError

    from txnwatch.core.config import ClusterConfig

    try:
        name = re.sub(r"[^A-Za-z0-9._-]", "-", bootstrap_server.split(",")[0].strip())[:63] or "bootstrap"
        return ClusterConfig(name=name, bootstrap_servers=bootstrap_server)
    except ValidationError as exc:
        fail(f"--bootstrap-server: {exc.errors()[0]['msg'].removeprefix('Value error, ')}")


@app.command()
def demo(port: Annotated[int, typer.Option(help="API port.")] = 8080,
         var_dir: Annotated[Path, typer.Option("--dir", help="Where the demo keeps its DB and lab.")] = Path("var"),
         brokers: Annotated[int, typer.Option(min=1, max=5, help="Lab brokers.")] = 3) -> None:
    """Start a lab Kafka cluster with the demo workload (a hanging transaction, an LSO stall) and the daemon."""
    from txnwatch.cli.demo import run_demo
    from txnwatch.lab.errors import LabError
    from txnwatch.supervise.binding import StartupError

    try:
        run_demo(port, var_dir.resolve(), brokers)
    except LabError as exc:
        fail(str(exc), exitcodes.FOUND_OR_FAILED)
    except StartupError as exc:
        fail(str(exc), exc.exit_code)
