"""Every command and option of `txnwatch` says what it does, and help is never cut at 80 columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from txnwatch.cli import commands as cli
from txnwatch.core import exitcodes


def _commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(cli.app)
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, command: Any) -> None:
        found.append((prefix, command))
        if hasattr(command, "list_commands"):  # a group (typer bundles its own click)
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                if prefix == "txnwatch" and name in cli.LAZY_SUBCOMMANDS:
                    sub = typer.main.get_command(cli.LAZY_SUBCOMMANDS[name][0]())
                else:
                    sub = command.get_command(ctx, name)
                if sub is not None:
                    walk(f"{prefix} {name}", sub)

    walk("txnwatch", root)
    return found


@pytest.mark.parametrize(("name", "command"), _commands(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_command_and_option_has_help(name: str, command: Any) -> None:
    assert (command.help or command.short_help or "").strip(), f"`{name}` has no help"
    for param in command.params:
        if param.param_type_name == "option" and param.name not in ("help", "version"):
            assert (param.help or "").strip(), f"`{name} {param.opts[0]}` has no help"


def test_help_wraps_instead_of_cutting() -> None:
    result = CliRunner().invoke(cli.app, ["abort", "--help"], env={"COLUMNS": "80"}, terminal_width=80)
    assert result.exit_code == 0
    assert "…" not in result.output and "TXNWATCH_ADMIN_TOKEN" in result.output


def _config(tmp_path: Path, **api: Any) -> Path:
    import yaml

    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"database_url": f"sqlite:///{tmp_path / 'db.sqlite'}", "api": api,
                                    "clusters": [{"name": "c", "bootstrap_servers": "127.0.0.1:1"}]}))
    return path


@pytest.mark.parametrize(("api", "token", "message"), [
    pytest.param({}, "x", "admin actions are disabled", id="disabled-by-default"),
    pytest.param({"admin_enabled": True, "admin_token": "right"}, "wrong", "admin token missing or wrong", id="bad-token"),
    pytest.param({"admin_enabled": True, "admin_token": "right"}, None, "admin token missing or wrong", id="no-token"),
])
def test_cli_abort_has_the_apis_guard(tmp_path: Path, api: dict[str, Any], token: str | None, message: str) -> None:
    args = ["abort", "--config", str(_config(tmp_path, **api)), "--topic", "t", "--partition", "0",
            "--producer-id", "1", "--producer-epoch", "0"] + (["--token", token] if token else [])
    result = CliRunner().invoke(cli.app, args, env={"TXNWATCH_ADMIN_TOKEN": ""})
    assert result.exit_code == exitcodes.USAGE and message in result.output
