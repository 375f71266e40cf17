"""The `txnwatch` command: its entry point (main), its subcommands (commands), `txnwatch run`'s body (daemon), the
one-shot `txnwatch hanging`, the abort, the demo and terminal tables.

Whichever of them is imported first, this runs first: httpx imports its own command-line client (rich, pygments,
click: ~6 MB resident) whenever those are installed, and typer brings rich; txnwatch never runs that client.  None
in sys.modules turns httpx's optional ``from ._main import main`` into the ImportError it is written to handle.
"""

import sys

sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]  # None in sys.modules blocks an import, by design
