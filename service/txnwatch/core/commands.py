"""The command lines txnwatch prints for on-call: they must run as printed.

The console, the API, ``txnwatch hanging`` and the demo all hand out the same abort line (by partition and
start offset; by transactional id where the cluster runs Kafka 4.1 or newer):
txnwatch's own ``txnwatch abort --bootstrap-server …``, because it is installed wherever
txnwatch is, while Kafka's ``kafka-transactions.sh`` often is not on PATH (the demo never
puts it there).  The program is named the way this process was started, so a line copied
from a demo run from a virtualenv works without activating it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

PROGRAM = "txnwatch"


def program(argv0: str | None = None, executable: str | None = None) -> str:
    """``txnwatch`` when that name on PATH is this installation; else the absolute path of the script that
    started this process; else ``<python> -m txnwatch`` (started as a module, e.g. by tests)."""
    argv0 = sys.argv[0] if argv0 is None else argv0
    executable = sys.executable if executable is None else executable
    on_path = shutil.which(PROGRAM)
    started = Path(argv0)
    if started.name == PROGRAM and started.exists():
        mine = started.resolve()
        if on_path is not None and Path(on_path).resolve() == mine:
            return PROGRAM
        return shlex.quote(str(mine))
    sibling = Path(executable).parent / PROGRAM  # the console script next to this interpreter (a virtualenv)
    if on_path is not None and sibling.exists() and Path(on_path).resolve() == sibling.resolve():
        return PROGRAM
    if sibling.exists() and os.access(sibling, os.X_OK):
        return shlex.quote(str(sibling))
    return f"{shlex.quote(executable)} -m txnwatch"


def abort_line(prog: str, bootstrap_server: str, topic: str, partition: int, start_offset: int, *,
               execute: bool = True) -> str:
    """``txnwatch abort`` naming the transaction by its start offset, as Kafka's tool does; with ``--execute`` so
    that it ends the transaction as printed (without it, the same line is a dry run)."""
    words = ["abort", "--bootstrap-server", bootstrap_server, "--topic", topic, "--partition", str(partition),
             "--start-offset", str(start_offset)]
    return " ".join([prog, *(shlex.quote(w) for w in words)]) + (" --execute" if execute else "")


#: The longest transactional id an admin action takes: Kafka's own bound (a STRING of up to 32,767 bytes).
TRANSACTIONAL_ID_MAX = 32_767
#: The first Kafka line whose admin aborts a transaction by its transactional id (forceTerminateTransaction).
ABORT_BY_ID_RELEASE = (4, 1)


def abort_by_id_line(prog: str, bootstrap_server: str, transactional_id: str, *, execute: bool = True) -> str:
    """``txnwatch abort --transactional-id``: the id's ongoing transaction aborted by its coordinator, whatever its
    partitions (Kafka 4.1+); with ``--execute`` so that it acts as printed."""
    words = ["abort", "--bootstrap-server", bootstrap_server, "--transactional-id", transactional_id]
    return " ".join([prog, *(shlex.quote(w) for w in words)]) + (" --execute" if execute else "")


def supports_abort_by_id(lowest_release: tuple[int, int] | None) -> bool:
    """Whether a cluster whose oldest broker runs ``lowest_release`` (None: not known) takes the abort by id."""
    return lowest_release is not None and lowest_release >= ABORT_BY_ID_RELEASE


def wrap_shell(line: str, width: int, indent: int = 4) -> list[str]:
    """A shell line folded between words with `` \\`` continuations, so every piece fits ``width`` and the
    lines still run as printed when pasted together; a single word longer than the width stays whole."""
    lines: list[str] = []
    current = ""
    for word in (shlex.quote(w) for w in shlex.split(line)):
        if current and len(current) + 1 + len(word) + 2 > width:
            lines.append(current + " \\")
            current = " " * indent + word
        else:
            current = f"{current} {word}" if current else word
    lines.append(current)
    return lines
