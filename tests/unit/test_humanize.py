from __future__ import annotations

import re
import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core import humanize


@pytest.mark.parametrize(("seconds", "text"), [
    pytest.param(0, "0 s", id="zero"),
    pytest.param(59.6, "1 min", id="rounds-up-to-a-minute"),
    pytest.param(80, "1 min 20 s", id="minutes-and-seconds"),
    pytest.param(3 * 3600 + 7, "3 h 7 s", id="skips-empty-units"),
    pytest.param(2 * 86400 + 5 * 3600 + 59, "2 d 5 h", id="two-units-at-most"),
    pytest.param(-5, "0 s", id="clock-skew-is-not-negative"),
    pytest.param(None, "—", id="unknown"),
])
def test_duration(seconds: float | None, text: str) -> None:
    assert humanize.duration(seconds) == text


@given(st.integers(min_value=0, max_value=10**9))
def test_duration_never_shows_more_than_two_units(seconds: int) -> None:
    assert 1 <= len(humanize.duration(seconds).split()) // 2 <= 2


def test_timestamp_and_ago() -> None:
    at = datetime(2026, 11, 23, 16, 40, 5, tzinfo=UTC)
    assert humanize.timestamp(at) == "2026-11-23 16:40:05 UTC"
    assert humanize.ago(at, at + timedelta(seconds=80)) == "1 min 20 s ago"


HANGING = {"cluster": "c", "max_transaction_timeout_ms": 900_000, "undetermined": [], "hanging": [
    {"topic": "orders-with-a-rather-long-topic-name", "partition": 3, "producer_id": 123456, "producer_epoch": 3,
     "coordinator_epoch": 7, "start_offset": 420, "last_timestamp_ms": 1_763_900_000_000,
     "duration_minutes": 1, "transactional_id": "orders-app-0_0-a-long-transactional-id",
     "reason": "partition_not_listed"},
    {"topic": "txnwatch-demo-stalled", "partition": 0, "producer_id": 1003, "producer_epoch": 0,
     "coordinator_epoch": -1, "start_offset": 1284, "last_timestamp_ms": 1_763_900_020_000,
     "duration_minutes": 1, "transactional_id": None, "reason": "no_transactional_id"}]}
#: Cells a person reads as one thing: each must sit whole on one line at any width that can hold it.
CELLS = ("orders-with-a-rather-long-topic-name-3", "123456/3", "orders-app-0_0-a-long-transactional-id",
         "Coordinator does not list this partition", "1 min 20 s ago", "txnwatch-demo-stalled-0", "1003/0", "1284",
         "No coordinator knows this producer", "1 min ago")
COMMANDS = ["txnwatch abort --bootstrap-server 127.0.0.1:39092 --topic orders-with-a-rather-long-topic-name "
            "--partition 3 --start-offset 420 --execute",
            "txnwatch abort --bootstrap-server 127.0.0.1:39092 --topic txnwatch-demo-stalled --partition 0 "
            "--start-offset 1284 --execute"]


def _commands(text: str) -> list[str]:
    """The shell lines in the output, continuations joined as a shell would join them."""
    joined = re.sub(r" \\\n\s*", " ", text)
    return [line.strip() for line in joined.splitlines() if line.strip().startswith("txnwatch abort")]


@pytest.mark.parametrize("width", [80, 100, 250])
def test_find_hanging_fits_the_terminal_by_whole_cells_and_ends_with_the_command(width: int) -> None:
    from txnwatch.cli.hanging import render_table

    text = render_table(HANGING, now_ms=1_763_900_080_000, width=width, bootstrap_server="127.0.0.1:39092",
                        prog="txnwatch")
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width and "…" not in text
    for cell in CELLS:
        assert any(cell in line for line in lines), f"{cell!r} is not whole on one line at {width} columns"
    assert _commands(text) == COMMANDS
    assert "drop --execute for a dry run" in text  # the next step, said once


def test_find_hanging_names_the_cluster_as_the_user_gave_it() -> None:
    from txnwatch.cli.hanging import render_table

    empty = render_table({**HANGING, "hanging": []}, bootstrap_server="127.0.0.1:39092")
    assert empty.startswith("No hanging transaction on 127.0.0.1:39092 ") and " cli " not in empty
    assert "transaction.max.timeout.ms, 15 min" in empty


def test_shell_lines_fold_between_words_and_run_as_printed() -> None:
    from txnwatch.core.commands import abort_line, wrap_shell

    printf = "printf '%s\\n'"  # stands in for the program: bash prints the arguments it was given, one a line
    line = abort_line(printf, "k1:9092,k2:9092", "we'ird", 1, 7)
    expected = ["abort", "--bootstrap-server", "k1:9092,k2:9092", "--topic", "we'ird", "--partition", "1",
                "--start-offset", "7", "--execute"]
    for width in (30, 60, 500):
        pieces = wrap_shell(line, width)
        assert (len(pieces) > 1) == (width < 500) and all(len(p) <= width for p in pieces)
        argv = subprocess.run(["bash", "-c", "\n".join(pieces)], capture_output=True, text=True, check=True).stdout
        assert argv.splitlines() == expected
