"""KIP-1050 error classes for the errors transactional producers and txnwatch's polls meet.

It lives with the Kafka layer, the only code that imports kafka-python: the wire
codes come from there, and every :class:`~txnwatch.core.model.RequestError` leaves this
layer with its class already set.  Detection matches on error *names* only.

Classes follow KIP-1050's exception table: retriable errors the client retries alone
(refresh-retriable after a metadata refresh: Java's InvalidMetadataException family,
which includes NetworkException), abortable (TransactionAbortableException), fatal ones
split into application-recoverable (the producer must be recreated) and
invalid-configuration (retrying cannot help).  KIP-1050 deliberately leaves
UNKNOWN_PRODUCER_ID and OUT_OF_ORDER_SEQUENCE_NUMBER unclassified; so does this table.

The table is keyed by Kafka's error *names*; the numeric codes come from
kafka-python's ``kafka.errors`` at import time, so they are the codes brokers really
send, never numbers remembered from a KIP draft (KIP-588's proposed 90/91 were not
what shipped).
"""

from __future__ import annotations

from dataclasses import dataclass

import kafka.errors as kafka_errors

from txnwatch.core.model import ErrorClass


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """One row of the table, with the wire code kafka-python knows for the name."""

    code: int
    name: str
    error_class: ErrorClass
    advice: str


_RETRIABLE = {  # the client retries by itself; persistent occurrences point at broker health
    "CORRUPT_MESSAGE": "Retried by the client; persistent corruption points at the client or a disk.",
    "REQUEST_TIMED_OUT": "Retried by the client; if persistent, check broker load and network latency.",
    "CONCURRENT_TRANSACTIONS": "The previous transaction's markers are still being written; retried. "
                               "Persistent: a partition of that transaction is unavailable (stuck Prepare*).",
    "COORDINATOR_LOAD_IN_PROGRESS": "The coordinator is loading __transaction_state after a failover; retried.",
    "NOT_ENOUGH_REPLICAS": "Fewer in-sync replicas than min.insync.replicas; check broker health.",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": "Written but not replicated in time; check ISR shrinkage.",
    "KAFKA_STORAGE_ERROR": "A log directory failed on the broker; check its disks.",
    "THROTTLING_QUOTA_EXCEEDED": "Client quota exceeded; back off or raise the quota.",
    "OFFSET_NOT_AVAILABLE": "Leader election in progress; retried.",
}
_REFRESH_RETRIABLE = {  # Java's InvalidMetadataException family: refresh metadata, then retry
    "NOT_COORDINATOR": "The coordinator moved; the client looks it up again.",
    "COORDINATOR_NOT_AVAILABLE": "No coordinator for the id right now (its __transaction_state partition "
                                 "has no leader); check offline partitions of __transaction_state.",
    "NOT_LEADER_FOR_PARTITION": "Leadership moved; the client refreshes metadata and retries.",
    "LEADER_NOT_AVAILABLE": "Partition without a leader; check offline partitions.",
    "UNKNOWN_TOPIC_OR_PARTITION": "Topic or partition unknown to this broker; metadata is refreshed.",
    "FENCED_LEADER_EPOCH": "Stale leader epoch; metadata is refreshed.",
    "UNKNOWN_LEADER_EPOCH": "The broker is behind the client's metadata; retried.",
    "REPLICA_NOT_AVAILABLE": "Replica not available; metadata is refreshed.",
    "NETWORK_EXCEPTION": "Connection lost mid-request; metadata is refreshed and the request retried. "
                         "Persistent: check broker reachability.",
}
_ABORTABLE = {  # abort the transaction and carry on with the same producer
    "TRANSACTION_ABORTABLE": "Abort the transaction and retry it with the same producer (KIP-890 part 2).",
}
_APPLICATION_RECOVERABLE = {  # the producer is unusable: close it, restore state, create a new one
    "PRODUCER_FENCED": "Another instance with the same transactional.id took over, or the coordinator aborted a "
                       "timed-out transaction and bumped the epoch (KIP-588): close this producer; look for a "
                       "duplicate transactional.id or transactions longer than transaction.timeout.ms.",
    "INVALID_PRODUCER_EPOCH": "Stale epoch: this producer was fenced; close it and create a new one.",
    "TRANSACTION_COORDINATOR_FENCED": "The coordinator was replaced mid-request; recreate the producer.",
    "INVALID_TXN_STATE": "The request does not fit the transaction's state (e.g. commit while PrepareAbort); "
                         "inspect with `kafka-transactions.sh describe`.  On Produce under KIP-890 it is abortable "
                         "instead: the partition was not verified in the transaction.",
    "INVALID_PRODUCER_ID_MAPPING": "The transactional id maps to another producer id; re-run initTransactions.",
    "TRANSACTIONAL_ID_NOT_FOUND": "The coordinator does not know the transactional id (expired after "
                                  "transactional.id.expiration.ms).",
    "UNKNOWN_MEMBER_ID": "Group membership lost; rejoin before send_offsets_to_transaction.",
    "ILLEGAL_GENERATION": "Stale group generation in send_offsets_to_transaction; abort and rejoin.",
    "FENCED_INSTANCE_ID": "Another consumer uses the same group.instance.id.",
}
_INVALID_CONFIGURATION = {  # fix configuration or ACLs; retrying cannot help
    "INVALID_TRANSACTION_TIMEOUT": "transaction.timeout.ms exceeds the brokers' transaction.max.timeout.ms; "
                                   "lower it or raise the broker limit.",
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": "Grant Write (and Describe) on the TransactionalId resource.",
    "CLUSTER_AUTHORIZATION_FAILED": "Grant the Cluster ACL needed (IdempotentWrite, or Describe/Alter for admin).",
    "TOPIC_AUTHORIZATION_FAILED": "Grant Describe/Read/Write on the topic as needed.",
    "GROUP_AUTHORIZATION_FAILED": "Grant Describe/Read on the consumer group.",
    "SASL_AUTHENTICATION_FAILED": "Wrong SASL credentials or mechanism for this listener.",
    "UNSUPPORTED_SASL_MECHANISM": "The listener does not enable this SASL mechanism.",
    "UNSUPPORTED_VERSION": "The broker does not support this API version; check client and broker versions.",
    "INVALID_CONFIG": "A configuration value was rejected.",
    "SECURITY_DISABLED": "Security features are disabled on this listener.",
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": "The topic's message format predates transactions; upgrade it.",
    "INVALID_RECORD": "The broker rejected a record (e.g. no key on a compacted topic); fix producer or topic.",
    "RECORD_LIST_TOO_LARGE": "Batch larger than the topic allows; lower batch.size or raise max.message.bytes.",
    "INVALID_REQUIRED_ACKS": "Transactions need acks=all.",
    "INVALID_TOPIC": "Illegal topic name, or a write to an internal topic.",
}
_UNCLASSIFIED = {  # KIP-1050 leaves these out of every class; the advice is what KIP-360 clients do
    "UNKNOWN_PRODUCER_ID": "The broker no longer has state for the producer id (its records were all deleted by "
                           "retention); KIP-360 clients bump the epoch and continue.",
    "OUT_OF_ORDER_SEQUENCE_NUMBER": "Sequence gap (a batch was lost); abort the transaction; KIP-360 clients bump "
                                    "the epoch and continue, older ones must be recreated.",
}

_TABLE: dict[str, tuple[ErrorClass, str]] = {
    name: (klass, advice)
    for klass, group in ((ErrorClass.RETRIABLE, _RETRIABLE), (ErrorClass.REFRESH_RETRIABLE, _REFRESH_RETRIABLE),
                         (ErrorClass.ABORTABLE, _ABORTABLE),
                         (ErrorClass.APPLICATION_RECOVERABLE, _APPLICATION_RECOVERABLE),
                         (ErrorClass.INVALID_CONFIGURATION, _INVALID_CONFIGURATION),
                         (ErrorClass.UNKNOWN, _UNCLASSIFIED))
    for name, advice in group.items()
}

#: Names Kafka renamed since kafka-python's table was written (code 6 is NOT_LEADER_OR_FOLLOWER since 2.7).
_ALIASES = {"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION"}

_UNKNOWN_ADVICE = "No KIP-1050 class for this error; see the broker logs and Kafka's protocol error documentation."


def _build() -> tuple[dict[int, ErrorInfo], dict[str, ErrorInfo]]:
    by_name: dict[str, int] = {}
    for value in vars(kafka_errors).values():
        errno, message = getattr(value, "errno", None), getattr(value, "message", None)
        if (isinstance(value, type) and issubclass(value, kafka_errors.BrokerResponseError)
                and isinstance(errno, int) and errno >= 0 and isinstance(message, str)):
            by_name.setdefault(message, errno)
    by_code: dict[int, ErrorInfo] = {}
    named: dict[str, ErrorInfo] = {}
    for name, (klass, advice) in _TABLE.items():
        code = by_name.get(name)
        if code is None:  # a name this kafka-python does not know; never invent a code for it
            continue
        info = ErrorInfo(code, name, klass, advice)
        by_code[code] = info
        named[name] = info
    return by_code, named


BY_CODE, BY_NAME = _build()


def classify(code_or_name: int | str | None) -> tuple[ErrorClass, str]:
    """KIP-1050 class and remediation advice for a wire error code or name; unknown ones are UNKNOWN."""
    if code_or_name is None:
        return ErrorClass.UNKNOWN, _UNKNOWN_ADVICE
    if isinstance(code_or_name, int):
        info = BY_CODE.get(code_or_name)
    else:
        name = code_or_name.upper()
        info = BY_NAME.get(_ALIASES.get(name, name))
    if info is None:
        return ErrorClass.UNKNOWN, _UNKNOWN_ADVICE
    return info.error_class, info.advice
