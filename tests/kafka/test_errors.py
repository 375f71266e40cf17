"""Error classes come from detection's table; this layer only looks them up."""

from __future__ import annotations

import sys
import types

import pytest
from kafka.errors import KafkaConnectionError, RequestTimedOutError

from txnwatch.kafka import errors
from txnwatch.model import ErrorClass


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("txnwatch.detect.errors")
    module.classify = lambda code: (ErrorClass.RETRIABLE if code == 7 else ErrorClass.ABORTABLE, "advice")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "txnwatch.detect.errors", module)


def test_broker_codes_are_classified_by_the_table(table: None) -> None:
    assert errors.from_code("ListTransactions", "broker:1", 7).error_class is ErrorClass.RETRIABLE
    assert errors.from_code("DescribeTransactions", "app", 105).error_class is ErrorClass.ABORTABLE


def test_client_side_timeouts_keep_their_wire_code(table: None) -> None:
    error = errors.from_exception("ListOffsets", "broker:2", RequestTimedOutError("after 5000 ms"), "earliest")
    assert (error.code, error.name, error.error_class) == (7, "REQUEST_TIMED_OUT", ErrorClass.RETRIABLE)
    assert error.message.startswith("earliest: ")


def test_transport_failures_have_no_code(table: None) -> None:
    error = errors.from_exception("ListGroups", "broker:3", KafkaConnectionError("refused"))
    assert (error.code, error.name, error.error_class) == (None, "KafkaConnectionError", ErrorClass.UNKNOWN)


def test_without_the_table_everything_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "txnwatch.detect.errors", None)
    assert errors.from_code("ListTransactions", "broker:1", 7).error_class is ErrorClass.UNKNOWN


def test_a_broken_table_is_unknown_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("txnwatch.detect.errors")
    module.classify = lambda code: "nonsense"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "txnwatch.detect.errors", module)
    assert errors.error_class(7) is ErrorClass.UNKNOWN
