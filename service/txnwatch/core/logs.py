"""Logging setup: human text by default, one JSON object per line for log pipelines.

Every line is passed through :func:`txnwatch.core.redact.redact` last, whatever logged it (txnwatch, a driver,
uvicorn, a traceback quoting a DSN): a URL's password never reaches the log, at any level.
"""

from __future__ import annotations

import json
import logging
import sys
import time

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


def configure(level: str = "INFO", fmt: str = "text") -> None:
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
