"""JSON logs carry cluster and poll id, so an operator can follow one poll across log lines."""

from __future__ import annotations

import json
import logging

from tests.test_collector import FakePoller, RecordingSink, count_evaluate
from txnwatch.collect.poll_loop import ClusterPollLoop
from txnwatch.core import logs
from txnwatch.core.views import LatestState


def test_failed_poll_logs_cluster_and_poll_id_as_json(capsys) -> None:
    logs.configure("INFO", "json")
    try:
        clock = [0.0]
        c = ClusterPollLoop("east", lambda: FakePoller("east", fail=True), count_evaluate, lambda: 0, [RecordingSink()],
                             LatestState(["east"]), clock=lambda: clock[0])
        c.poll_once()
        clock[0] += 1000
        c.poll_once()
        lines = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
        failures = [line for line in lines if "polls failing" in line["msg"]]
        # The log budget: the outage starts with one line; the same failure again is not news (issue 15, defect 6).
        assert [(f["cluster"], f["poll_id"], f["level"]) for f in failures] == [("east", 1, "warning")]
        assert not [line for line in lines if "exc" in line]  # an unreachable cluster is no bug: no traceback
    finally:
        logging.getLogger().handlers.clear()


class _Client:
    """Like kafka-python's clients: a __str__ that names it, a __del__ that can fail."""

    def __str__(self) -> str:
        return "<KafkaProducer client_id=demo-1 transactional_id=demo-txn>"

    def __del__(self) -> None:
        raise RuntimeError("closing after the interpreter's logging shut down\nsecond line")


class _Nameless:
    def __del__(self) -> None:
        raise ValueError("gone")


def test_an_ignored_exception_is_one_line_naming_the_object(capsys) -> None:
    """Issue 27 item 7: the demo's log printed `<kafka.producer.kafka.KafkaProducer object at 0x…>`."""
    import gc
    import sys

    logs.configure("INFO", "text")
    try:
        _Client()
        _Nameless()
        gc.collect()
        err = capsys.readouterr().err
        assert "ignored during _Client.__del__: RuntimeError: closing after the interpreter's logging shut down" in err
        assert "ignored during _Nameless.__del__: ValueError: gone" in err
        assert " object at 0x" not in err and "Traceback" not in err and "second line" not in err
        # An object that can name itself is named so; one that cannot, by its class, never by its address.
        assert logs.describe(_Client.__new__(_Client)) == "KafkaProducer client_id=demo-1 transactional_id=demo-txn"
        assert logs.describe(_Nameless.__new__(_Nameless)) == "_Nameless"
    finally:
        logging.getLogger().handlers.clear()
        sys.unraisablehook = sys.__unraisablehook__


def _record(msg: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("txnwatch.alerting.outbox", logging.WARNING, __file__, 1, msg, args, exc_info)


def test_text_escapes_what_json_escapes() -> None:
    """Issue 38 item 7: the message and its arguments, one line in both formats, the same characters escaped."""
    hostile = "id\n2026-01-01 00:00:00,000 CRITICAL forged\r\t\x1b[31m\x7f\x9b\u2028\u202e\ufeff\ud800"
    text = logs.TextFormatter("%(levelname)s %(name)s: %(message)s").format(_record("key %s (%r)", hostile, 1))
    entry = json.loads(logs.JsonFormatter().format(_record("key %s (%r)", hostile, 1)))
    assert "\n" not in text and "\x1b" not in text and "\x9b" not in text and "\u2028" not in text
    assert text == "WARNING txnwatch.alerting.outbox: key " + json.dumps(hostile)[1:-1] + " (1)"
    assert entry["msg"] == f"key {hostile} (1)"  # JSON's own escapes, undone by its reader
    assert logs.escape_controls("tenant café 订单") == "tenant café 订单"  # printable text stays as it is


def test_a_traceback_keeps_its_lines_but_none_passes_for_a_record() -> None:
    try:
        raise ValueError("bad id\n2026-01-01 00:00:00,000 CRITICAL forged\x1b[2K")
    except ValueError as exc:
        record = _record("notifier crashed on %s", "x\ny", exc=exc)
    text = logs.TextFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s").format(record)
    first, *rest = text.split("\n")
    assert first.endswith("notifier crashed on x\\ny") and rest and "\x1b" not in text
    assert all(line.startswith("    ") for line in rest), text
    assert any("ValueError: bad id" in line for line in rest)
    assert any(line.startswith("    2026-01-01 00:00:00,000 CRITICAL forged\\u001b[2K") for line in rest)
