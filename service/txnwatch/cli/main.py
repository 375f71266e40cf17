"""The `txnwatch` entry point: ``txnwatch run`` without typer, every other command line through it.

typer brings click and rich (~4 MB resident, measured with benchmarks/peers.py's import floor) that the
daemon would carry for its whole life only to parse four options.  So a plain ``txnwatch run`` whose
options are all in their plain spelling is parsed here and handed to txnwatch.cli.daemon.run_daemon; any
other command line (help, another command, an unusual spelling, a value that is not plain digits) goes to
the typer application in txnwatch.cli.commands, which stays the one definition of the command line, its
help and its usage errors. tests/unit/test_cli_main.py checks both parsers agree on every case here.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from txnwatch.core import exitcodes
from txnwatch.core.extras import MissingExtra

#: `txnwatch run`'s options as txnwatch.cli.commands.run declares them: flag -> (keyword, value kind).
RUN_OPTIONS = {"--config": ("config", "path"), "-c": ("config", "path"), "--host": ("host", "text"),
               "--port": ("port", "int"), "--workers": ("workers", "workers")}
#: --workers' range in txnwatch.cli.commands.run (typer's min/max).
WORKERS_RANGE = range(33)


@dataclass(frozen=True)
class RunOptions:
    """What ``txnwatch run`` was given, as the typer command would have received it."""

    config: Path | None = None
    host: str | None = None
    port: int | None = None
    workers: int | None = None


def parse_run(args: list[str], environ: dict[str, str] | os._Environ[str] = os.environ) -> RunOptions | None:
    """``txnwatch run``'s options, or None when the command line is anything but plain: then typer parses it.

    Plain means each option once, as ``--name value`` or ``--name=value`` (``-c value``), a non-empty value,
    and numbers written as ASCII digits within their range; no positional argument, no ``--``."""
    values: dict[str, object] = {}
    i = 0
    while i < len(args):
        flag, eq, value = args[i].partition("=")
        if flag not in RUN_OPTIONS or (eq and flag == "-c"):
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
            i += 1
        i += 1
        key, kind = RUN_OPTIONS[flag]
        if key in values or not value or value.startswith("-"):
            return None
        if kind in ("int", "workers"):
            if not (value.isascii() and value.isdigit()):
                return None
            number = int(value)
            if kind == "workers" and number not in WORKERS_RANGE:
                return None
            values[key] = number
        else:
            values[key] = Path(value) if kind == "path" else value
    from txnwatch.core.config import CONFIG_ENV

    if "config" not in values and environ.get(CONFIG_ENV):
        values["config"] = Path(environ[CONFIG_ENV])  # typer's envvar=TXNWATCH_CONFIG: an empty one is unset
    return RunOptions(**values)  # type: ignore[arg-type]  # keys and kinds come from RUN_OPTIONS above


def main() -> None:
    try:
        options = parse_run(sys.argv[2:]) if sys.argv[1:2] == ["run"] else None
        if options is None:
            from txnwatch.cli.commands import app

            app()
        else:
            from txnwatch.cli.daemon import run_daemon

            run_daemon(options.config, options.host, options.port, options.workers)
    except MissingExtra as exc:
        print(f"txnwatch: {exc}", file=sys.stderr, flush=True)
        sys.exit(exitcodes.MISSING_DEPENDENCY)
    except KeyboardInterrupt:
        sys.exit(exitcodes.INTERRUPTED)
