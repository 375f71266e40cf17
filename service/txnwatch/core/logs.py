"""Logging setup: human text by default, one JSON object per line for log pipelines.

Every line is passed through :func:`txnwatch.core.redact.redact` last, whatever logged it (txnwatch, a driver,
uvicorn, a traceback quoting a DSN): a URL's password never reaches the log, at any level.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

from txnwatch.core.redact import redact


class JsonFormatter(logging.Formatter):
    """Fields a log pipeline can index; `cluster` and `poll_id` come from `extra=`."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ("cluster", "poll_id"):
            if hasattr(record, key):
                entry[key] = getattr(record, key)
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return redact(json.dumps(entry, default=str))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def describe(obj: object) -> str:
    """An object as a person reads it: its own ``__str__`` when its class has one (kafka-python's clients name
    their client and transactional ids), else its class name; never ``<module.Class object at 0x…>``."""
    kind = type(obj)
    if kind.__str__ is not object.__str__ and not isinstance(obj, type):
        try:
            text = str(obj)
        except Exception:  # a half-built object (its constructor failed) cannot always say who it is
            text = ""
        if text and " object at 0x" not in text:
            return text.strip("<>")
    owner = getattr(obj, "__self__", None) or getattr(obj, "__qualname__", None)
    if isinstance(owner, str):
        return owner
    return kind.__qualname__ if owner is None else describe(owner)


def _unraisable(hook: Any) -> None:
    """An exception nobody can catch (a ``__del__`` at exit, a dying thread's cleanup): one log line naming the
    object, instead of Python's "Exception ignored in: <… object at 0x…>" and a traceback on stderr."""
    exc = hook.exc_value
    what = describe(hook.object) if hook.object is not None else "cleanup"
    logging.getLogger("txnwatch").warning("ignored during %s: %s: %s", what, type(exc).__name__ if exc else "error",
                                          str(exc).splitlines()[0] if exc and str(exc) else "no detail")


def configure(level: str = "INFO", fmt: str = "text") -> None:
    sys.unraisablehook = _unraisable
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kafka-python logs every reconnect at WARNING/ERROR; txnwatch reports cluster health itself.
    # A broker outage made it log an ERROR per connection attempt (the collector logs each cluster's down/up
    # transitions itself, see core/logbudget.py).  Silenced even at DEBUG: kafka-python's DEBUG lines print SASL
    # request bytes (PLAIN passwords, OAuth tokens), and no txnwatch log level may leak a credential.
    logging.getLogger("kafka").setLevel(logging.CRITICAL)
    logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # httpx logs whole request URLs at INFO, and webhook URLs carry their secret.
    logging.getLogger("httpx").setLevel(logging.WARNING)
