"""The `txnwatch` command's exit codes: one meaning each, so a script or an init system can act on them.

Documented in README.md ("Exit codes"); tests check that no two names share a number.
"""

from __future__ import annotations

OK = 0
#: `hanging` found hanging transactions; or an operation failed at run time (migration, database, lab).
FOUND_OR_FAILED = 1
#: Bad configuration (file or TXNWATCH_* environment) or bad command-line arguments.
USAGE = 2
#: A Kafka cluster could not be reached (`txnwatch hanging`).
CLUSTER_UNREACHABLE = 3
#: The API's host:port cannot be bound (already in use, or not allowed).
PORT_UNAVAILABLE = 4
#: An optional part is missing: a Python extra (txnwatch[pipeline], txnwatch[archive]) or Java for PySpark.
MISSING_DEPENDENCY = 5
#: `abort` with a database: the audit could not record the intent, so nothing was sent to Kafka (safe to retry).
NOT_AUDITED = 6
#: Stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130

ALL = {name: value for name, value in globals().items() if name.isupper() and isinstance(value, int)}
