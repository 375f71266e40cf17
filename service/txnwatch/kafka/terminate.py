"""Abort an ongoing transaction by its transactional id, as Kafka 4.1's ``Admin.forceTerminateTransaction`` does.

What Kafka's admin sends (kafka-clients 4.1.1, read from its classes: ``KafkaAdminClient.forceTerminateTransaction``
calls ``fenceProducers`` for the one id, whose ``FenceProducersHandler`` sends): FindCoordinator for the id
(key type TRANSACTION), then to that coordinator an InitProducerId naming the transactional id with producer id
and epoch -1 (no 2PC flags).  The coordinator fences the id's producer (bumps its epoch), aborts the ongoing
transaction (ABORT markers on every partition in it) and answers CONCURRENT_TRANSACTIONS until the abort is
complete; then it answers the new producer id and epoch.  Kafka's admin retries CONCURRENT_TRANSACTIONS and
COORDINATOR_LOAD_IN_PROGRESS, and finds the coordinator again on NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE:
so does :func:`terminate_transaction`, within ``timeout_ms``.

Before it acts it checks, as the partition abort does (txnwatch.kafka.abort):

* every broker's release (ApiVersions, txnwatch.kafka.release): Kafka documents forceTerminateTransaction from
  4.1 (KIP-939's admin call and ``kafka-transactions.sh forceTerminateTransaction``); on an older cluster the
  answer is a refusal, ``UNSUPPORTED_RELEASE``, that names the partition abort instead;
* the coordinator's description of the id (DescribeTransactions): only an ``Ongoing`` transaction is aborted.
  Sent for any other state, the same request would still fence a live producer and abort nothing, so it is
  refused (``NO_ONGOING_TRANSACTION``); a transaction already ending (Prepare*) is the coordinator's to finish.

The timeout the InitProducerId carries is the id's own (from the description): the coordinator keeps it, and
it is one the broker's ``transaction.max.timeout.ms`` already accepted (Kafka's admin sends its request timeout,
which a broker with a lower maximum refuses).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import replace

import kafka.errors as Errors
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer.transaction import InitProducerIdRequest

from txnwatch.core.commands import ABORT_BY_ID_RELEASE
from txnwatch.core.model import RequestError, TerminateOutcome, TransactionDescription, TxnState
from txnwatch.kafka import errors, parse, release
from txnwatch.kafka.batches import Call
from txnwatch.kafka.errors import ClusterUnreachable
from txnwatch.kafka.wire import Wire

#: The first release line whose Admin offers forceTerminateTransaction (KIP-939).
MIN_RELEASE = ABORT_BY_ID_RELEASE
UNSUPPORTED_RELEASE = "UNSUPPORTED_RELEASE"
NO_ONGOING_TRANSACTION = "NO_ONGOING_TRANSACTION"
NOT_CONFIRMED = "ABORT_NOT_CONFIRMED"
_TRANSACTION_KEY = 1  # FindCoordinator key type: TRANSACTION
#: v6 adds KIP-939's 2PC flags, unstable in 4.1 and not sent by Kafka's admin either.
_INIT_PRODUCER_ID_MAX_VERSION = 5
_RETRY_PAUSE_S = 0.1
_RETRIED = frozenset({Errors.ConcurrentTransactionsError.errno, Errors.CoordinatorLoadInProgressError.errno})
_MOVED = frozenset({Errors.NotCoordinatorError.errno, Errors.CoordinatorNotAvailableError.errno})

Sleep = Callable[[float], Awaitable[None]]


def refuse_release(lowest: str) -> str:
    """The refusal on a cluster older than 4.1, naming what works there instead."""
    return (f"the oldest broker runs Kafka {lowest}: forceTerminateTransaction (abort by transactional id) needs "
            f"{MIN_RELEASE[0]}.{MIN_RELEASE[1]} or newer; abort the transaction on each of its partitions instead "
            "(txnwatch abort --topic T --partition P --start-offset O, as txnwatch hanging and the console print it)")


async def terminate_transaction(wire: Wire, cluster: str, transactional_id: str, *, dry_run: bool, timeout_ms: int,
                                sleep: Sleep, monotonic: Callable[[], float] = time.monotonic,
                                ) -> TerminateOutcome:
    """Check (dry run) or abort ``transactional_id``'s ongoing transaction; refusals are data, in ``error``.
    ``sleep`` pauses between retries on the IO loop that runs this (kafka-python's, not asyncio's).

    Raises :class:`ClusterUnreachable` only when no broker answers at all."""
    asked = TerminateOutcome(transactional_id=transactional_id, dry_run=dry_run)
    brokers = wire.candidate_nodes()
    if not brokers:
        raise ClusterUnreachable(cluster, "no broker known")
    replies = await wire.exchange(release.api_versions(brokers))
    found, problems = release.releases([(r.call.node_id, r.response, r.failure) for r in replies])
    oldest = release.lowest(found)
    if oldest is None:
        if all(r.failure is not None for r in replies):
            raise ClusterUnreachable(cluster, "; ".join(f"{p.target}: {p.message}" for p in problems))
        return replace(asked, error=problems[0])
    asked = replace(asked, lowest_release=oldest.label)
    if oldest.release < MIN_RELEASE:
        return replace(asked, error=RequestError(release.API, errors.broker_target(oldest.node_id), None,
                                                 UNSUPPORTED_RELEASE, refuse_release(oldest.label)))

    coordinator, problem = await _coordinator(wire, transactional_id, brokers)
    if coordinator is None:
        return replace(asked, error=problem)
    asked = replace(asked, coordinator_id=coordinator)
    described, refused = await _describe(wire, coordinator, transactional_id)
    if described is None:
        return replace(asked, error=refused)
    checked = replace(asked, state=described.state.value, producer_id=described.producer_id,
                      producer_epoch=described.producer_epoch, partitions=tuple(sorted(described.partitions)))
    if described.state is not TxnState.ONGOING:
        why = (f"{transactional_id} is {described.state.value}: its coordinator is ending the transaction already"
               if described.state.value.startswith("Prepare") else
               f"{transactional_id} has no ongoing transaction (state {described.state.value}); aborting it by id "
               "would only fence its producer")
        return replace(checked, error=RequestError("DescribeTransactions", transactional_id, None,
                                                   NO_ONGOING_TRANSACTION, why))
    if dry_run:
        return checked
    return await _init_producer_id(wire, checked, coordinator, brokers, described.timeout_ms,
                                   deadline=monotonic() + timeout_ms / 1000, sleep=sleep, monotonic=monotonic)


async def _coordinator(wire: Wire, transactional_id: str, brokers: list[int]) -> tuple[int | None, RequestError]:
    problem = RequestError("FindCoordinator", transactional_id, None, "COORDINATOR_NOT_AVAILABLE",
                           "no broker named the transaction coordinator")
    for node in brokers[:2]:
        (reply,) = await wire.exchange([Call("FindCoordinator", node, FindCoordinatorRequest(
            key=transactional_id, key_type=_TRANSACTION_KEY, coordinator_keys=[transactional_id]))])
        if reply.failure is not None:
            problem = errors.from_exception("FindCoordinator", errors.broker_target(node), reply.failure)
            continue
        response = reply.response
        rows = list(getattr(response, "coordinators", None) or ())
        code, node_id = ((rows[0].error_code, rows[0].node_id) if rows else
                         (response.error_code, getattr(response, "node_id", -1)))
        if code:
            problem = errors.from_code("FindCoordinator", transactional_id, int(code))
            continue
        return int(node_id), problem
    return None, problem


async def _describe(wire: Wire, coordinator: int, transactional_id: str) -> tuple[TransactionDescription | None, RequestError | None]:
    (reply,) = await wire.exchange([Call("DescribeTransactions", coordinator,
                                         DescribeTransactionsRequest(transactional_ids=[transactional_id]))])
    if reply.failure is not None:
        return None, errors.from_exception("DescribeTransactions", errors.broker_target(coordinator), reply.failure)
    parsed = parse.parse_describe_transactions(reply.response, coordinator)
    described = parsed.value.get(transactional_id)
    if described is None:
        return None, parsed.errors[0] if parsed.errors else errors.corrupt(
            "DescribeTransactions", transactional_id, "answer does not mention the id")
    return described, None


async def _init_producer_id(wire: Wire, checked: TerminateOutcome, coordinator: int, brokers: list[int],
                            txn_timeout_ms: int, *, deadline: float, sleep: Sleep,
                            monotonic: Callable[[], float]) -> TerminateOutcome:
    """InitProducerId until the coordinator completes the abort (or the deadline), as Kafka's admin retries it."""
    outcome = checked
    last: RequestError | None = None
    while True:
        (reply,) = await wire.exchange([Call("InitProducerId", coordinator, InitProducerIdRequest(
            transactional_id=checked.transactional_id, transaction_timeout_ms=txn_timeout_ms, producer_id=-1,
            producer_epoch=-1, max_version=_INIT_PRODUCER_ID_MAX_VERSION))])
        if reply.failure is not None:
            last = errors.from_exception("InitProducerId", errors.broker_target(coordinator), reply.failure)
        else:
            code = int(reply.response.error_code)
            if not code:
                return replace(outcome, started=True, aborted=True, new_producer_id=int(reply.response.producer_id),
                               new_producer_epoch=int(reply.response.producer_epoch), error=None)
            last = errors.from_code("InitProducerId", checked.transactional_id, code)
            if code == Errors.ConcurrentTransactionsError.errno:
                outcome = replace(outcome, started=True)  # the coordinator is aborting it now
            elif code in _MOVED:
                found, _ = await _coordinator(wire, checked.transactional_id, brokers)
                coordinator = found if found is not None else coordinator
            elif code not in _RETRIED:
                return replace(outcome, error=last)  # refused (authorization, invalid timeout...): nothing done
        if monotonic() >= deadline:
            if outcome.started:
                return replace(outcome, error=RequestError(
                    "InitProducerId", checked.transactional_id, None, NOT_CONFIRMED,
                    "the coordinator began the abort (CONCURRENT_TRANSACTIONS) and did not confirm its end in time; "
                    "it completes it on its own: check with kafka-transactions.sh describe"))
            return replace(outcome, error=last)
        await sleep(_RETRY_PAUSE_S)
