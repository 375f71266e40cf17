"""Optional parts of txnwatch and the clear message when one is not installed.

The daemon needs only the core dependencies.  PySpark (491 MB) is the pipeline's alone and
pyarrow (170 MB) serves the Parquet archive and the pipeline, so both live in extras; code that
needs them calls :func:`require` first and the user reads which extra to install instead of a
``ModuleNotFoundError`` traceback.

The compiled modules (setup.py) are optional too, but nothing fails without them: their Python twins run,
slower, and :func:`say_uncompiled` says so once.
"""

from __future__ import annotations

import logging
from importlib.util import find_spec

_SAID_UNCOMPILED: set[str] = set()  # the compiled parts already said missing, once per process each


def say_uncompiled(logger: logging.Logger, part: str, doing: str, cost: str, reason: str | None) -> bool:
    """Warn once per process that ``part`` (a compiled module of setup.py) is missing: what runs instead
    (``doing``), what it costs, why it is missing (the ImportError), and how to get it.  True if it warned now."""
    if part in _SAID_UNCOMPILED:
        return False
    _SAID_UNCOMPILED.add(part)
    logger.warning("%s, %s: %s is not installed (%s); reinstall txnwatch where a C compiler and Python's headers are",
                   doing, cost, part, reason)
    return True

#: module -> (extra that provides it, what needs it)
PROVIDERS = {
    "pyspark": ("pipeline", "the PySpark pipeline"),
    "pyarrow": ("archive", "the Parquet history archive"),
    "botocore": ("msk", "Amazon MSK IAM authentication (sasl_mechanism AWS_MSK_IAM)"),
}


class MissingExtra(RuntimeError):
    """An optional dependency is not installed; the message says which extra brings it."""

    def __init__(self, module: str, extra: str, purpose: str) -> None:
        super().__init__(f"{purpose} needs the Python package {module!r}, which is not installed; "
                         f"install it with: pip install 'txnwatch[{extra}]'")
        self.module, self.extra = module, extra


def require(*modules: str) -> None:
    """Raise :class:`MissingExtra` for the first of ``modules`` that cannot be imported."""
    for module in modules:
        try:
            missing = find_spec(module) is None
        except ValueError:  # sys.modules holds None for it: imports of it are blocked
            missing = True
        if missing:
            extra, purpose = PROVIDERS[module]
            raise MissingExtra(module, extra, purpose)
