"""A broker's release line and finalized transaction.version, read from ApiVersions (txnwatch.kafka.release).

kafka-python's table of recorded broker answers is the canary: if a kafka-python upgrade reads a line differently,
the hazards (detect/hazards.py) and the abort by id's refusal (kafka/terminate.py) would silently change.
"""

from __future__ import annotations

import pytest

from tests.kafka import answers as a
from txnwatch.core.model import BrokerRelease
from txnwatch.kafka import release


@pytest.mark.parametrize(("line", "expected"), [
    pytest.param((3, 9), ((3, 9), False), id="3.9: no transaction.version 2 yet"),
    pytest.param((4, 0), ((4, 0), False), id="4.0"),
    pytest.param((4, 1), ((4, 1), False), id="4.1: the first with forceTerminateTransaction"),
    pytest.param((4, 2), ((4, 2), False), id="4.2"),
    pytest.param((4, 3), ((4, 3), False), id="4.3"),
])
def test_kafka_pythons_recorded_brokers_read_as_their_line(line: tuple[int, int],
                                                            expected: tuple[tuple[int, int], bool]) -> None:
    parsed = release.parse_api_versions(a.api_versions(line), 1)
    assert parsed.errors == () and parsed.value is not None
    assert (parsed.value.release, parsed.value.newest_known) == expected


@pytest.mark.parametrize("raised", [pytest.param({28: 6}, id="TxnOffsetCommit v6"),
                                    pytest.param({42: 3}, id="DeleteGroups v3")])
def test_a_44_broker_reads_as_44_or_newer(raised: dict[int, int]) -> None:
    """4.4.0's message definitions: TxnOffsetCommit v6 and DeleteGroups v3 are stable there, not on 4.3."""
    parsed = release.parse_api_versions(a.api_versions((4, 3), raise_to=raised), 2)
    assert parsed.value == BrokerRelease(2, (4, 4), newest_known=True, transaction_version=2)
    assert parsed.value.label == "4.4+"


@pytest.mark.parametrize(("level", "expected"), [(2, 2), (1, 1), (0, 0), (None, None)])
def test_the_finalized_transaction_version(level: int | None, expected: int | None) -> None:
    parsed = release.parse_api_versions(a.api_versions((4, 1), transaction_version=level), 1)
    assert parsed.value is not None and parsed.value.transaction_version == expected


def test_a_refusal_and_a_failure_are_errors_and_the_oldest_broker_is_the_clusters() -> None:
    found, problems = release.releases([
        (3, a.api_versions((4, 1)), None), (1, a.api_versions((4, 0)), None),
        (2, None, ConnectionError("refused")), (4, a.api_versions((4, 1), error_code=35), None)])
    assert [(r.node_id, r.release) for r in found] == [(1, (4, 0)), (3, (4, 1))]
    assert [(p.target, p.api) for p in problems] == [("broker:2", "ApiVersions"), ("broker:4", "ApiVersions")]
    lowest = release.lowest(found)
    assert lowest is not None and lowest.node_id == 1
    assert release.lowest([]) is None
