"""`txnwatch run`'s body, shared by the typer command (txnwatch.cli.commands) and the entry point's fast path
(txnwatch.cli.main), so neither typer nor click nor rich is resident in the daemon (issue 25, idle RSS).

Failures leave through ``SystemExit`` with one line on stderr: click passes it through unchanged, so the exit
codes and messages are the same whichever way the command was parsed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from txnwatch.core import exitcodes

if TYPE_CHECKING:
    from txnwatch.core.config import Settings


def fail(message: str, code: int = exitcodes.USAGE) -> NoReturn:
    """One line on stderr (URL passwords masked), then ``code``."""
    from txnwatch.core.redact import redact

    print(f"txnwatch: {redact(message)}", file=sys.stderr, flush=True)
    raise SystemExit(code)


def load(path: Path | None, **overrides: object) -> Settings:
    """The settings, or every config mistake on its own line (origin: key: what is wrong, what is allowed) and
    exit 2."""
    from txnwatch.core.config import ConfigError, load_settings

    try:
        return load_settings(path, **overrides)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"txnwatch: {problem}", file=sys.stderr, flush=True)
        raise SystemExit(exitcodes.USAGE) from None


def run_daemon(config: Path | None, host: str | None, port: int | None, workers: int | None) -> None:
    """Run the daemon: collector, alerting, REST API and /metrics (the command line's overrides applied)."""
    from txnwatch.runtime.malloc_arenas import limit_arenas
    from txnwatch.supervise.binding import StartupError
    from txnwatch.supervise.daemon import serve

    limit_arenas()  # before any thread starts (txnwatch.runtime.malloc_arenas says why)

    settings = load(config)
    overrides = {k: v for k, v in (("host", host), ("port", port), ("workers", workers)) if v is not None}
    if overrides:
        api = settings.api.model_copy(update=overrides)
        settings = settings.model_copy(update={"api": api})
    try:
        serve(settings)
    except StartupError as exc:
        fail(str(exc), exc.exit_code)
