"""KIP-1050 error table: codes are kafka-python's wire codes, classes are KIP-1050's."""

from __future__ import annotations

import kafka.errors as kafka_errors
import pytest

from txnwatch.core.model import ErrorClass
from txnwatch.kafka.error_classes import _TABLE, BY_CODE, BY_NAME, classify


def test_every_table_name_resolves_to_the_code_kafka_python_sends() -> None:
    assert set(BY_NAME) == set(_TABLE)
    for name, info in BY_NAME.items():
        assert kafka_errors.for_code(info.code).message == name
        assert BY_CODE[info.code] is info


@pytest.mark.parametrize(("code", "name", "klass"), [
    (90, "PRODUCER_FENCED", ErrorClass.APPLICATION_RECOVERABLE),  # shipped as 90, not KIP-588's draft 91
    (47, "INVALID_PRODUCER_EPOCH", ErrorClass.APPLICATION_RECOVERABLE),
    (51, "CONCURRENT_TRANSACTIONS", ErrorClass.RETRIABLE),
    (16, "NOT_COORDINATOR", ErrorClass.REFRESH_RETRIABLE),
    (13, "NETWORK_EXCEPTION", ErrorClass.REFRESH_RETRIABLE),
    (120, "TRANSACTION_ABORTABLE", ErrorClass.ABORTABLE),
    (50, "INVALID_TRANSACTION_TIMEOUT", ErrorClass.INVALID_CONFIGURATION),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", ErrorClass.INVALID_CONFIGURATION),
    (87, "INVALID_RECORD", ErrorClass.INVALID_CONFIGURATION),
    (59, "UNKNOWN_PRODUCER_ID", ErrorClass.UNKNOWN),
])
def test_classify_by_code_and_by_name_agree(code: int, name: str, klass: ErrorClass) -> None:
    by_code, advice = classify(code)
    assert by_code is klass and advice
    assert classify(name) == (by_code, advice)
    assert classify(name.lower()) == (by_code, advice)


def test_renamed_error_is_found_under_its_new_name() -> None:
    assert classify("NOT_LEADER_OR_FOLLOWER") == classify(6)
    assert classify(6)[0] is ErrorClass.REFRESH_RETRIABLE


@pytest.mark.parametrize("unknown", [None, 0, -1, 9999, "NO_SUCH_ERROR", ""])
def test_unknown_errors_are_unknown_not_raised(unknown: int | str | None) -> None:
    klass, advice = classify(unknown)
    assert klass is ErrorClass.UNKNOWN and advice
