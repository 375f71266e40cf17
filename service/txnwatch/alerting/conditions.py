"""What the collector hands the evaluator: the conditions that hold right now, one per incident.

Incident keys are built here, and only here, because they become PagerDuty
dedup keys: if two code paths spelled them differently, one incident would page twice
and its resolve would never match its trigger.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

# The built-in rule names and their runbooks are spelled once, in txnwatch.core.vocabulary.
from txnwatch.core.textbounds import bound_chars
from txnwatch.core.vocabulary import CLUSTER_DOWN as CLUSTER_DOWN
from txnwatch.core.vocabulary import FLINK_LINGERING_TRANSACTION as FLINK_LINGERING_TRANSACTION
from txnwatch.core.vocabulary import HANGING_TRANSACTION as HANGING_TRANSACTION
from txnwatch.core.vocabulary import LSO_STALL as LSO_STALL
from txnwatch.core.vocabulary import PREPARE_STUCK as PREPARE_STUCK
from txnwatch.core.vocabulary import RULES as RULES
from txnwatch.core.vocabulary import TRANSACTION_TIMEOUT_EXCEEDED as TRANSACTION_TIMEOUT_EXCEEDED
from txnwatch.core.vocabulary import TRANSACTIONS_CANNOT_COMMIT as TRANSACTIONS_CANNOT_COMMIT
from txnwatch.core.vocabulary import VERIFICATION_FAILURE_RATE as VERIFICATION_FAILURE_RATE
from txnwatch.core.vocabulary import runbook_link as runbook_link

if TYPE_CHECKING:
    from txnwatch.core.canary import CanaryFailure

#: Characters of an alert's incident key (the alerts table's column).
INCIDENT_KEY_MAX = 700


@dataclass(frozen=True)
class Condition:
    """One incident that holds at this poll; the set passed to ``evaluate`` is complete, so absence means cleared."""

    rule: str
    incident_key: str
    cluster: str
    summary: str
    labels: Mapping[str, str] = field(default_factory=dict)
    details: Mapping[str, Any] = field(default_factory=dict)
    # Conditions with the same group share one root cause and page as one incident (alerting/grouping.py).
    group: str | None = None


def producer_group(cluster: str, producer_id: int) -> str:
    """A producer id has at most one open transaction: its hanging partitions, the LSO stalls it causes and its
    coordinator-side timeout or stuck Prepare* are one root cause."""
    return f"{cluster}/pid={producer_id}"


def partition_incident_key(rule: str, cluster: str, topic: str, partition: int, producer_id: int) -> str:
    """Per-partition incidents: a new producer id on the same partition is a different incident."""
    return f"{rule}/{cluster}/{topic}-{partition}/pid={producer_id}"


def transaction_incident_key(rule: str, cluster: str, transactional_id: str, producer_id: int) -> str:
    """Coordinator-side incidents (timeout exceeded, prepare stuck) belong to a transactional id, not a partition.

    The id is a tenant's (up to 32,767 bytes in Kafka); the key is the alert row's identity, stored in at most
    INCIDENT_KEY_MAX characters, so a long id keeps its head and a hash tail (still one key per id) and the
    producer id stays readable at the end.
    """
    head, tail = f"{rule}/{cluster}/txn=", f"/pid={producer_id}"
    return head + bound_chars(transactional_id, INCIDENT_KEY_MAX - len(head) - len(tail)) + tail


def partition_stall_key(rule: str, cluster: str, topic: str, partition: int) -> str:
    """An LSO stall is about the partition; its blocking producer is a detail that may be unknown."""
    return f"{rule}/{cluster}/{topic}-{partition}"


def cluster_incident_key(rule: str, cluster: str) -> str:
    return f"{rule}/{cluster}"


def abort_command(bootstrap_server: str, topic: str, partition: int, producer_id: int, producer_epoch: int,
                  coordinator_epoch: int) -> str:
    """The exact command on-call pastes; quoted because topic names may hold shell-special characters."""
    return " ".join([
        "kafka-transactions.sh", "--bootstrap-server", shlex.quote(bootstrap_server), "abort",
        "--topic", shlex.quote(topic), "--partition", str(partition),
        "--producer-id", str(producer_id), "--producer-epoch", str(producer_epoch),
        "--coordinator-epoch", str(coordinator_epoch),
    ])


def abort_at_offset_command(bootstrap_server: str, topic: str, partition: int, start_offset: int) -> str:
    """The variant for when the producer epoch or coordinator epoch is unknown (e.g. the id is gone)."""
    return " ".join([
        "kafka-transactions.sh", "--bootstrap-server", shlex.quote(bootstrap_server), "abort",
        "--topic", shlex.quote(topic), "--partition", str(partition), "--start-offset", str(start_offset),
    ])


def cluster_down(cluster: str, error: str, since_seconds: float | None = None) -> Condition:
    """Passed when a poll fails; while it holds, the cluster's other alerts are frozen (see evaluator)."""
    details: dict[str, Any] = {"error": error, "runbook": runbook_link(CLUSTER_DOWN),
                               "suggested_action": "Check broker reachability and txnwatch's credentials; "
                                                   "transaction alerts for this cluster are on hold meanwhile."}
    if since_seconds is not None:
        details["down_for_seconds"] = round(since_seconds, 1)
    return Condition(rule=CLUSTER_DOWN, incident_key=cluster_incident_key(CLUSTER_DOWN, cluster), cluster=cluster,
                     summary=f"[{cluster}] Kafka cluster unreachable: {error}", labels={"cluster": cluster},
                     details=details)


def cannot_commit(cluster: str, failure: CanaryFailure, since_iso: str) -> Condition:
    """The canary's finding as an incident: one per cluster (the key never names the broker, so a blame that moves
    during the incident, a coordinator failing over to a broker that fails too, retitles it, never pages twice)."""
    blame = failure.blame
    error = failure.error
    partitions = ", ".join(str(p) for p in failure.failing_partitions)
    return Condition(
        TRANSACTIONS_CANNOT_COMMIT, cluster_incident_key(TRANSACTIONS_CANNOT_COMMIT, cluster), cluster,
        f"[{cluster}] transactions cannot commit: the canary failed {failure.failed_rounds} rounds in a row at "
        f"{error.stage.value} ({error.name}); blame: {blame.text}",
        {"cluster": cluster},
        {"transactional_id": failure.transactional_id, "blame": blame.kind.value, "broker_id": blame.broker_id,
         "transaction_state_partition": blame.state_partition, "blame_text": blame.text,
         "stage": error.stage.value, "error": error.name, "error_class": error.error_class.value,
         "message": error.message, "failed_rounds": failure.failed_rounds, "failing_partitions": partitions,
         "since": since_iso, "runbook": runbook_link(TRANSACTIONS_CANNOT_COMMIT),
         "suggested_action": "Check the blamed broker (is it up, is it the leader it should be?) and "
                             "`kafka-topics.sh --describe --topic __transaction_state --unavailable-partitions`; "
                             "producers of this cluster cannot commit meanwhile."})
