"""The Kafka layer turns failures into RequestErrors with their name and KIP-1050 class already set."""

from __future__ import annotations

from kafka.errors import KafkaConnectionError, RequestTimedOutError

from txnwatch.core.model import ErrorClass
from txnwatch.kafka import errors


def test_broker_codes_are_named_and_classified() -> None:
    timed_out = errors.from_code("ListTransactions", "broker:1", 7)
    assert (timed_out.name, timed_out.error_class) == ("REQUEST_TIMED_OUT", ErrorClass.RETRIABLE)
    not_found = errors.from_code("DescribeTransactions", "app", 105)
    assert (not_found.name, not_found.error_class) == ("TRANSACTIONAL_ID_NOT_FOUND", ErrorClass.APPLICATION_RECOVERABLE)


def test_client_side_timeouts_keep_their_wire_code() -> None:
    error = errors.from_exception("ListOffsets", "broker:2", RequestTimedOutError("after 5000 ms"), "earliest")
    assert (error.code, error.name, error.error_class) == (7, "REQUEST_TIMED_OUT", ErrorClass.RETRIABLE)
    assert error.message.startswith("earliest: ")


def test_transport_failures_have_no_code() -> None:
    error = errors.from_exception("ListGroups", "broker:3", KafkaConnectionError("refused"))
    assert (error.code, error.name, error.error_class) == (None, "KafkaConnectionError", ErrorClass.UNKNOWN)


def test_codes_outside_the_table_are_unknown_not_a_crash() -> None:
    assert errors.error_class(None) is ErrorClass.UNKNOWN
    assert errors.error_class(9999) is ErrorClass.UNKNOWN
