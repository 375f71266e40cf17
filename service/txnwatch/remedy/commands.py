"""The kinds of admin action, one small command type each: what it names, how the audit keeps it, how it is sent.

A command is frozen data, validated by its door (the API's request model, the CLI's options), with two methods:
``audit_target`` (its target as the audit row keeps it) and ``send`` (its one Kafka call, through
:class:`AdminCalls`, which the composition root wires to kafka/).  The use case (txnwatch.remedy.execute) needs
nothing else of a kind: the abort by transactional id (:class:`AbortById`) is a second class here and a second
call in :class:`AdminCalls`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from txnwatch.core.config import ClusterConfig
from txnwatch.core.model import AbortOutcome, ClusterUnreachable, TerminateOutcome, TopicPartition

ResultT = TypeVar("ResultT")


class AbortTransaction(Protocol):
    """The partition abort's Kafka call (WriteTxnMarkers, as ``kafka-transactions.sh abort``).

    Raises :class:`~txnwatch.core.model.ClusterUnreachable`; blocking (the API runs it in a worker thread)."""

    def __call__(self, cluster: ClusterConfig, tp: TopicPartition, producer_id: int | None,
                 producer_epoch: int | None, coordinator_epoch: int | None, *, dry_run: bool,
                 start_offset: int | None = None) -> AbortOutcome: ...


class TerminateTransaction(Protocol):
    """The abort by transactional id's Kafka call (Kafka 4.1's ``forceTerminateTransaction``: FindCoordinator,
    then InitProducerId at the coordinator; txnwatch.kafka.terminate).

    Raises :class:`~txnwatch.core.model.ClusterUnreachable`; blocking (the API runs it in a worker thread)."""

    def __call__(self, cluster: ClusterConfig, transactional_id: str, *, dry_run: bool) -> TerminateOutcome: ...


def _no_terminate(cluster: ClusterConfig, transactional_id: str, *, dry_run: bool) -> TerminateOutcome:
    raise ClusterUnreachable(cluster.name, "no abort-by-id call is wired")


@dataclass(frozen=True, slots=True)
class AdminCalls:
    """The Kafka calls of the admin actions, one per kind (txnwatch.runtime.wiring.ADMIN_CALLS: kafka/'s)."""

    abort_transaction: AbortTransaction
    terminate_transaction: TerminateTransaction = _no_terminate


@dataclass(frozen=True, slots=True)
class Sent(Generic[ResultT]):
    """What Kafka answered to one command: ``result`` (the kind's own) is None when the cluster was not reached."""

    result: ResultT | None
    #: The line the audit row and both doors show: "aborted", "would abort", "NAME: why", "cluster unreachable: ...".
    outcome: str
    #: Kafka changed something (an ABORT marker was written): an action that must not be sent again.
    acted: bool
    #: Kafka said no (no such open transaction, another epoch): nothing changed.
    refused: bool

    @property
    def unreachable(self) -> bool:
        return self.result is None


class Command(Protocol[ResultT]):
    @property
    def action(self) -> str:
        """The audit row's ``action``."""

    @property
    def cluster(self) -> str: ...

    def audit_target(self) -> dict[str, Any]:
        """The target as the audit row's ``target`` keeps it (JSON)."""

    def send(self, calls: AdminCalls, config: ClusterConfig, *, dry_run: bool) -> Sent[ResultT]:
        """Check (dry run) or act; never raises for what Kafka answers, unreachable included."""


@dataclass(frozen=True, slots=True)
class AbortPartition:
    """End the open transaction on one partition, named by producer id and epoch or (both None) by the offset
    where it starts, as Kafka's tool takes it; the partition leader is asked first (txnwatch.kafka.abort)."""

    action: ClassVar[str] = "abort_transaction"
    cluster: str
    topic: str
    partition: int
    producer_id: int | None
    producer_epoch: int | None
    coordinator_epoch: int | None = None
    start_offset: int | None = None

    def audit_target(self) -> dict[str, Any]:
        target: dict[str, Any] = {"topic": self.topic, "partition": self.partition, "producer_id": self.producer_id,
                                  "producer_epoch": self.producer_epoch, "coordinator_epoch": self.coordinator_epoch}
        if self.start_offset is not None:
            target["start_offset"] = self.start_offset
        return target

    def send(self, calls: AdminCalls, config: ClusterConfig, *, dry_run: bool) -> Sent[AbortOutcome]:
        tp = TopicPartition(self.topic, self.partition)
        try:
            result = calls.abort_transaction(config, tp, self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                             dry_run=dry_run, start_offset=self.start_offset)
        except ClusterUnreachable as exc:
            return Sent(None, f"cluster unreachable: {exc}", acted=False, refused=False)
        if result.aborted:
            return Sent(result, "aborted", acted=True, refused=False)
        if result.error is not None:
            return Sent(result, f"{result.error.name}: {result.error.message}", acted=False, refused=True)
        return Sent(result, "would abort", acted=False, refused=False)


@dataclass(frozen=True, slots=True)
class AbortById:
    """End a transactional id's ongoing transaction, whatever its partitions, as Kafka 4.1's
    ``kafka-transactions.sh forceTerminateTransaction --transactionalId X`` does: its coordinator fences the
    id's producer and aborts the transaction (txnwatch.kafka.terminate).  Refused on clusters older than 4.1,
    where the partition abort (:class:`AbortPartition`) is the way."""

    action: ClassVar[str] = "abort_transactional_id"
    cluster: str
    transactional_id: str

    def audit_target(self) -> dict[str, Any]:
        return {"transactional_id": self.transactional_id}

    def send(self, calls: AdminCalls, config: ClusterConfig, *, dry_run: bool) -> Sent[TerminateOutcome]:
        try:
            result = calls.terminate_transaction(config, self.transactional_id, dry_run=dry_run)
        except ClusterUnreachable as exc:
            return Sent(None, f"cluster unreachable: {exc}", acted=False, refused=False)
        if result.aborted:
            return Sent(result, "aborted", acted=True, refused=False)
        if result.started:  # begun by the coordinator, which finishes it: done, not to be sent again
            assert result.error is not None
            return Sent(result, f"abort begun, not confirmed: {result.error.message}", acted=True, refused=False)
        if result.error is not None:
            return Sent(result, f"{result.error.name}: {result.error.message}", acted=False, refused=True)
        return Sent(result, "would abort", acted=False, refused=False)
