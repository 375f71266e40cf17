"""Optional parts of txnwatch and the clear message when one is not installed.

The daemon needs only the core dependencies.  PySpark (491 MB) is the pipeline's alone and
pyarrow (170 MB) serves the Parquet archive and the pipeline, so both live in extras; code that
needs them calls :func:`require` first and the user reads which extra to install instead of a
``ModuleNotFoundError`` traceback.
"""

from __future__ import annotations

from importlib.util import find_spec

#: module -> (extra that provides it, what needs it)
PROVIDERS = {
    "pyspark": ("pipeline", "the PySpark pipeline"),
    "pyarrow": ("archive", "the Parquet history archive"),
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
