"""transactional_id_pattern on real brokers: Kafka 4.1+ filters ListTransactions itself (v2, KIP-1152, RE2/J),
Kafka 3.9 lists every id and txnwatch filters (labs on 3.9.1, 4.1.1 and 4.4.0); the ids kept must be the same, and
the ones written here by hand.

The ids are made tricky on purpose (a prefix that only a search would find, upper case, a non-ASCII digit, a
dot where the pattern has '.', a newline that '.' matches too).  On 4.1 the broker's own answer (kafka-python's admin client, which sends the
pattern and filters nothing) is compared too, so RE2/J itself is the reference for the subset txnwatch accepts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient
from kafka.protocol.admin.transactions import ListTransactionsRequest

from txnwatch.core.idpattern import wire_pattern
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings
from txnwatch.lab.faults import transactional_producer
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION, OLDER_KAFKA_VERSION
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, LabSettings, TransactionSettings

pytestmark = [pytest.mark.lab, pytest.mark.slow]

RUN = f"lf{uuid.uuid4().hex[:6]}"
IDS = {"a1": f"{RUN}-team-a-1", "a2": f"{RUN}-team-a-22", "b1": f"{RUN}-team-b-1", "xa3": f"x{RUN}-team-a-3",
       "a": f"{RUN}-team-a", "upper": f"{RUN}-TEAM-a-4", "arabic": f"{RUN}-team-a-\u0663", "dot": f"{RUN}-team.a-5",
       "newline": f"{RUN}-team-a-\n7"}

#: pattern -> the ids it keeps (whole-id match, ASCII \d and \w), written out by hand.
CASES = [
    pytest.param(f"{RUN}-team-a-.*", {"a1", "a2", "arabic", "newline"}, id="prefix"),
    pytest.param(f"{RUN}-team-a-\\d+", {"a1", "a2"}, id="ascii-digits"),
    pytest.param(f"{RUN}-team-[ab]-\\w", {"a1", "b1"}, id="class-and-one-word-char"),
    pytest.param(f"(?:x)?{RUN}-team-a(-.*)?", {"a1", "a2", "xa3", "a", "arabic", "newline"}, id="optional-groups"),
    pytest.param(f"{RUN}-team-a-.7", {"newline"}, id="dot-is-a-newline-too"),
    pytest.param(f"{RUN}-team.a-[0-9]+", {"a1", "a2", "dot"}, id="dot-is-any-char"),
    pytest.param(f"^{RUN}-team-a-[0-9]{{2}}$", {"a2"}, id="anchors-and-repeat"),
]


def _lab(version: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from txnwatch.lab.cluster import start_lab

    lab = start_lab(LabSettings(brokers=1, combined=True, proxy=False, kafka_version=version,
                                transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS)),
                    tmp_path_factory.mktemp(f"txnwatch-lab-{version}"), die_with_parent=True)
    try:
        for tid in IDS.values():  # each id gets a producer id: the coordinator lists it (Empty)
            transactional_producer(lab.bootstrap_servers, tid, 10_000).close()
        yield lab
    finally:
        lab.down()


@pytest.fixture(scope="module", params=[OLDER_KAFKA_VERSION, DEFAULT_KAFKA_VERSION, NEWEST_KAFKA_VERSION])
def versioned_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    yield from _lab(request.param, tmp_path_factory)


@pytest.mark.parametrize(("pattern", "kept"), CASES)
def test_same_ids_from_the_broker_filter_and_from_ours(versioned_lab: Any, pattern: str, kept: set[str]) -> None:
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=versioned_lab.bootstrap_servers,
                                         request_timeout_ms=10_000, transactional_id_pattern=pattern)
    expected = {IDS[k] for k in kept}
    with ClusterConnection(settings) as conn:
        snapshot = conn.poll()
    assert {t.transactional_id for t in snapshot.listed} == expected
    assert set(snapshot.transactions) == expected, "only ids in scope are described"

    admin = KafkaAdminClient(bootstrap_servers=versioned_lab.bootstrap_servers, client_id="lf-reference")
    try:
        speaks_v2 = admin._manager.broker_version_data.api_version(ListTransactionsRequest) >= 2  # no public accessor
        assert speaks_v2 is (versioned_lab.settings.kafka_version != OLDER_KAFKA_VERSION)
        if speaks_v2:  # RE2/J's own answer to the pattern as txnwatch sends it, nothing filtered on our side
            answered = {t.transactional_id for rows in admin.list_transactions(
                transactional_id_pattern=wire_pattern(pattern)).values() for t in rows}
            assert answered == expected
    finally:
        admin.close()
