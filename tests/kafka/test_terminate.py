"""The abort by transactional id (Kafka 4.1's forceTerminateTransaction) against a scripted cluster.

What Kafka's admin sends (kafka-clients 4.1.1): FindCoordinator for the id, then InitProducerId at the coordinator
with producer id and epoch -1, retried while the coordinator answers CONCURRENT_TRANSACTIONS (it is aborting).
txnwatch asks ApiVersions first (every broker 4.1+, else a refusal naming the partition abort) and
DescribeTransactions (Ongoing only: the same request would fence a live producer and abort nothing).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.errors import ConcurrentTransactionsError, NotCoordinatorError, TransactionalIdAuthorizationFailedError

from tests.kafka import answers as a
from tests.kafka import scripted_wire
from txnwatch.core.model import TerminateOutcome, TopicPartition
from txnwatch.kafka.batches import Call
from txnwatch.kafka.terminate import NO_ONGOING_TRANSACTION, NOT_CONFIRMED, UNSUPPORTED_RELEASE, terminate_transaction

TID = "flink-sink-3-1204"
TPS = (TopicPartition("orders", 0), TopicPartition("orders", 2))


class ScriptedWire(scripted_wire.ScriptedWire):
    """Brokers of the given releases; the id coordinated by broker 2, Ongoing on TPS, unless a test scripts more."""

    def __init__(self, releases: dict[int, tuple[int, int]], **answers: Callable[[Call], Any]) -> None:
        super().__init__(list(releases), {
            "ApiVersions": lambda c: a.api_versions(releases[c.node_id]),
            "FindCoordinator": lambda c: a.find_coordinator(2, TID),
            "DescribeTransactions": lambda c: a.describe_transactions(
                a.txn(TID, producer_id=7, epoch=3, timeout_ms=15_000, partitions=TPS)),
            **answers})

    def supports(self, request_class: Any, version: int) -> bool:
        return True

    def apis(self) -> list[tuple[str, int]]:
        return [(c.api, c.node_id) for c in self.calls]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds


def answers(*codes: int) -> Callable[[Call], Any]:
    """InitProducerId answers in turn: each error code, then the new producer id 7 at epoch 5."""
    script: Iterator[int] = iter(codes)

    def answer(call: Call) -> Any:
        code = next(script, 0)
        return a.init_producer_id(error_code=code) if code else a.init_producer_id(7, 5)
    return answer


def run(wire: ScriptedWire, *, dry_run: bool, timeout_ms: int = 30_000, clock: Clock | None = None
        ) -> TerminateOutcome:
    clock = clock or Clock()
    return asyncio.run(terminate_transaction(wire, "lab", TID, dry_run=dry_run, timeout_ms=timeout_ms,
                                             sleep=clock.sleep, monotonic=clock))


@pytest.mark.parametrize("releases", [
    pytest.param({1: (3, 9), 2: (3, 9)}, id="3.9 everywhere"),
    pytest.param({1: (4, 1), 2: (4, 0), 3: (4, 1)}, id="a rolling upgrade: one broker still on 4.0"),
])
@pytest.mark.parametrize("dry_run", [True, False])
def test_a_cluster_older_than_41_is_refused_with_the_partition_abort_named(releases: dict[int, tuple[int, int]],
                                                                          dry_run: bool) -> None:
    wire = ScriptedWire(releases)
    outcome = run(wire, dry_run=dry_run)
    assert outcome.error is not None and outcome.error.name == UNSUPPORTED_RELEASE
    oldest = min(releases.values())
    assert outcome.lowest_release == f"{oldest[0]}.{oldest[1]}" and not outcome.started and not outcome.aborted
    assert f"runs Kafka {oldest[0]}.{oldest[1]}" in outcome.error.message
    assert "txnwatch abort --topic T --partition P --start-offset O" in outcome.error.message
    assert {api for api, _ in wire.apis()} == {"ApiVersions"}, "nothing but ApiVersions reached the cluster"


def test_a_dry_run_describes_the_ongoing_transaction_and_sends_nothing_else() -> None:
    wire = ScriptedWire({1: (4, 1), 2: (4, 1)})
    outcome = run(wire, dry_run=True)
    assert outcome == TerminateOutcome(TID, dry_run=True, coordinator_id=2, state="Ongoing", producer_id=7,
                                       producer_epoch=3, partitions=TPS, lowest_release="4.1")
    assert wire.apis() == [("ApiVersions", 1), ("ApiVersions", 2), ("FindCoordinator", 1),
                           ("DescribeTransactions", 2)]


def test_the_abort_retries_while_the_coordinator_aborts_then_answers_the_new_epoch() -> None:
    wire = ScriptedWire({1: (4, 1), 2: (4, 2)}, InitProducerId=answers(ConcurrentTransactionsError.errno,
                                                                        ConcurrentTransactionsError.errno))
    outcome = run(wire, dry_run=False)
    assert (outcome.started, outcome.aborted, outcome.new_producer_id, outcome.new_producer_epoch, outcome.error) == (
        True, True, 7, 5, None)
    sent = [c.request for c in wire.calls if c.api == "InitProducerId"]
    assert len(sent) == 3 and {(r.transactional_id, r.producer_id, r.producer_epoch, r.transaction_timeout_ms)
                               for r in sent} == {(TID, -1, -1, 15_000)}, "Kafka's request, with the id's timeout"
    assert {c.node_id for c in wire.calls if c.api == "InitProducerId"} == {2}


def test_a_moved_coordinator_is_found_again() -> None:
    coordinators = iter([2, 1])
    wire = ScriptedWire({1: (4, 1), 2: (4, 1)}, InitProducerId=answers(NotCoordinatorError.errno),
                        FindCoordinator=lambda c: a.find_coordinator(next(coordinators), TID))
    outcome = run(wire, dry_run=False)
    assert outcome.aborted
    assert [n for api, n in wire.apis() if api == "InitProducerId"] == [2, 1]


def test_begun_but_not_confirmed_in_time_says_so_and_counts_as_done() -> None:
    wire = ScriptedWire({1: (4, 1)}, InitProducerId=answers(*[ConcurrentTransactionsError.errno] * 1000))
    outcome = run(wire, dry_run=False, timeout_ms=1_000)
    assert outcome.started and not outcome.aborted
    assert outcome.error is not None and outcome.error.name == NOT_CONFIRMED


def test_a_refused_init_producer_id_did_nothing() -> None:
    wire = ScriptedWire({1: (4, 1)}, InitProducerId=answers(TransactionalIdAuthorizationFailedError.errno))
    outcome = run(wire, dry_run=False)
    assert not outcome.started and not outcome.aborted
    assert outcome.error is not None and outcome.error.code == TransactionalIdAuthorizationFailedError.errno


@pytest.mark.parametrize("state", ["Empty", "CompleteCommit", "CompleteAbort", "PrepareCommit", "PrepareAbort"])
def test_no_ongoing_transaction_is_refused_before_anything_is_sent(state: str) -> None:
    wire = ScriptedWire({1: (4, 1)}, DescribeTransactions=lambda c: a.describe_transactions(a.txn(TID, state=state)))
    outcome = run(wire, dry_run=False)
    assert outcome.error is not None and outcome.error.name == NO_ONGOING_TRANSACTION and outcome.state == state
    assert "InitProducerId" not in {api for api, _ in wire.apis()}
