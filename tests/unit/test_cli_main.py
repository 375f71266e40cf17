"""`txnwatch run`'s fast path (txnwatch.cli.main.parse_run) against the typer command it stands in for.

Every command line the fast path takes must reach the daemon exactly as typer would hand it over; anything
else must go to typer (None), which then gives its usual help or usage error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from txnwatch.cli import commands, daemon
from txnwatch.cli.main import RunOptions, parse_run

TAKEN = [
    pytest.param([], {}, RunOptions(), id="nothing"),
    pytest.param(["--config", "a.yaml"], {}, RunOptions(config=Path("a.yaml")), id="config"),
    pytest.param(["-c", "a.yaml"], {}, RunOptions(config=Path("a.yaml")), id="short-config"),
    pytest.param(["--config=./a//b.yaml"], {}, RunOptions(config=Path("a/b.yaml")), id="config-equals"),
    pytest.param([], {"TXNWATCH_CONFIG": "/etc/t.yaml"}, RunOptions(config=Path("/etc/t.yaml")), id="config-env"),
    pytest.param(["-c", "x.yaml"], {"TXNWATCH_CONFIG": "/etc/t.yaml"}, RunOptions(config=Path("x.yaml")),
                 id="option-beats-env"),
    pytest.param([], {"TXNWATCH_CONFIG": ""}, RunOptions(), id="empty-env-is-unset"),
    pytest.param(["--host", "0.0.0.0", "--port", "8080", "--workers", "2"], {},
                 RunOptions(host="0.0.0.0", port=8080, workers=2), id="all"),
    pytest.param(["--port=0999", "--workers=0"], {}, RunOptions(port=999, workers=0), id="leading-zero"),
    pytest.param(["--workers", "32", "--host=::1"], {}, RunOptions(host="::1", workers=32), id="workers-max"),
]

LEFT_TO_TYPER = [
    pytest.param(["--help"], id="help"),
    pytest.param(["-h"], id="short-help"),
    pytest.param(["--workers", "33"], id="workers-above-range"),
    pytest.param(["--workers", "-1"], id="workers-negative"),
    pytest.param(["--port", "80a"], id="port-not-a-number"),
    pytest.param(["--port", "８０"], id="port-non-ascii-digits"),
    pytest.param(["--port", " 80"], id="port-with-space"),
    pytest.param(["--port", "8_080"], id="port-with-underscore"),
    pytest.param(["--host", "a", "--host", "b"], id="repeated"),
    pytest.param(["--host"], id="missing-value"),
    pytest.param(["--host="], id="empty-value"),
    pytest.param(["--host", "-x"], id="value-like-an-option"),
    pytest.param(["-c=a.yaml"], id="short-with-equals"),
    pytest.param(["-ca.yaml"], id="short-glued"),
    pytest.param(["--conf", "a.yaml"], id="abbreviated"),
    pytest.param(["extra"], id="positional"),
    pytest.param(["--", "--host", "a"], id="double-dash"),
    pytest.param(["--version"], id="unknown-option"),
]


def _typer_hands_over(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> RunOptions:
    received: list[RunOptions] = []
    monkeypatch.setattr(daemon, "run_daemon", lambda *given: received.append(RunOptions(*given)))
    result = CliRunner().invoke(commands.app, ["run", *args], env=env)
    assert result.exit_code == 0, result.output
    return received[0]


@pytest.mark.parametrize(("args", "env", "expected"), TAKEN)
def test_the_fast_path_hands_over_what_typer_would(args: list[str], env: dict[str, str], expected: RunOptions,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXNWATCH_CONFIG", raising=False)
    assert parse_run(args, env) == expected
    assert _typer_hands_over(args, {"TXNWATCH_CONFIG": "", **env}, monkeypatch) == expected


@pytest.mark.parametrize("args", LEFT_TO_TYPER)
def test_anything_unusual_is_left_to_typer(args: list[str]) -> None:
    assert parse_run(args, {}) is None
