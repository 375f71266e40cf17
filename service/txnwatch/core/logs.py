"""Logging setup: human text by default, one JSON object per line for log pipelines.

Every line is passed through :func:`txnwatch.core.redact.redact` last, whatever logged it (txnwatch, a driver,
uvicorn, a traceback quoting a DSN): a URL's password never reaches the log, at any level.

A record is one line in either format, whatever its message and arguments hold: Kafka lets a tenant put
any character in a transactional id or a group id, and those reach log lines (an incident key, a dedup
key).  The JSON format escapes them by being JSON; the text format escapes the same characters the same
way (:func:`escape_controls`: ``\n``, ``\r``, ``\t``, ``\u001b`` …), so an id holding
``"\n2026-01-01 00:00:00,000 CRITICAL …"`` cannot forge a record and one holding ANSI escapes cannot
drive the terminal that reads ``kubectl logs`` (issue 38 item 7).  A traceback stays several lines (it is
read by people) with the same characters escaped inside each line and every line after the first
indented, so no line of it can pass for a record of its own either.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

from txnwatch.core.redact import redact

# What JSON escapes that a terminal or a line-oriented reader acts on: C0 controls, DEL, C1 controls (CSI
# and others), the Unicode line and paragraph separators, bidirectional and zero-width controls ("Trojan
# Source"), the BOM, and lone surrogates (they cannot be encoded).  Printable text, non-ASCII included,
# stays as it is: an operator reads ids in their own script.
_CONTROLS = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff\ud800-\udfff]")
_CONTROLS_BUT_NEWLINE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069"
                                   "\ufeff\ud800-\udfff]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}
_CONTINUATION = "\n    "


def _escape_one(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT.get(char) or f"\\u{ord(char):04x}"


def escape_controls(text: str) -> str:
    """``text`` with every control character written as JSON writes it (``\\n``, ``\\u001b``): one line."""
    return _CONTROLS.sub(_escape_one, text) if _CONTROLS.search(text) else text


def _escape_block(text: str) -> str:
    """A traceback or stack: control characters escaped inside each line, the lines after the first indented."""
    return _CONTROLS_BUT_NEWLINE.sub(_escape_one, text).replace("\n", _CONTINUATION)


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
    """``asctime level logger: message``, the message (its arguments substituted) escaped to one line."""

    def format(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.getMessage())
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += _CONTINUATION + _escape_block(record.exc_text)
        if record.stack_info:
            text += _CONTINUATION + _escape_block(self.formatStack(record.stack_info))
        return redact(text)


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
