"""KIP-1050 error classes for the errors transactional producers and txnwatch's polls meet.

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

from txnwatch.model import ErrorClass

C = ErrorClass


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    code: int
    name: str
    error_class: ErrorClass
    advice: str


_TABLE: dict[str, tuple[ErrorClass, str]] = {
    # retriable: the client retries by itself; persistent occurrences point at broker health.
    "CORRUPT_MESSAGE": (C.RETRIABLE, "Retried by the client; persistent corruption points at the client or a disk."),
    "REQUEST_TIMED_OUT": (C.RETRIABLE, "Retried by the client; if persistent, check broker load and network latency."),
    "CONCURRENT_TRANSACTIONS": (C.RETRIABLE, "The previous transaction's markers are still being written; retried. "
                                               "Persistent: a partition in the transaction is unavailable (stuck Prepare*)."),
    "COORDINATOR_LOAD_IN_PROGRESS": (C.RETRIABLE, "The coordinator is loading __transaction_state after a failover; retried."),
    "NOT_ENOUGH_REPLICAS": (C.RETRIABLE, "Fewer in-sync replicas than min.insync.replicas; check broker health."),
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": (C.RETRIABLE, "Written but not replicated in time; check ISR shrinkage."),
    "KAFKA_STORAGE_ERROR": (C.RETRIABLE, "A log directory failed on the broker; check its disks."),
    "THROTTLING_QUOTA_EXCEEDED": (C.RETRIABLE, "Client quota exceeded; back off or raise the quota."),
    "OFFSET_NOT_AVAILABLE": (C.RETRIABLE, "Leader election in progress; retried."),
    # refresh-retriable: refresh metadata (find the new leader/coordinator), then retry.
    "NOT_COORDINATOR": (C.REFRESH_RETRIABLE, "The coordinator moved; the client looks it up again."),
    "COORDINATOR_NOT_AVAILABLE": (C.REFRESH_RETRIABLE, "No coordinator for the transactional id right now "
                                                        "(its __transaction_state partition has no leader)."),
    "NOT_LEADER_FOR_PARTITION": (C.REFRESH_RETRIABLE, "Leadership moved; the client refreshes metadata and retries."),
    "LEADER_NOT_AVAILABLE": (C.REFRESH_RETRIABLE, "Partition without a leader; check offline partitions."),
    "UNKNOWN_TOPIC_OR_PARTITION": (C.REFRESH_RETRIABLE, "Topic or partition unknown to this broker; metadata is refreshed."),
    "FENCED_LEADER_EPOCH": (C.REFRESH_RETRIABLE, "Stale leader epoch; metadata is refreshed."),
    "UNKNOWN_LEADER_EPOCH": (C.REFRESH_RETRIABLE, "The broker is behind the client's metadata; retried."),
    "REPLICA_NOT_AVAILABLE": (C.REFRESH_RETRIABLE, "Replica not available; metadata is refreshed."),
    "NETWORK_EXCEPTION": (C.REFRESH_RETRIABLE, "Connection lost mid-request; the client refreshes metadata and "
                                                "retries.  Persistent: check broker reachability."),
    # abortable: abort the current transaction and start a new one (same producer).
    "TRANSACTION_ABORTABLE": (C.ABORTABLE, "Abort the transaction and retry it (KIP-890 part 2 clients do this)."),
    # KIP-1050 leaves these two out of every class; the advice is what KIP-360 clients do.
    "UNKNOWN_PRODUCER_ID": (C.UNKNOWN, "The broker no longer has state for the producer id (all its records were "
                                        "deleted by retention); KIP-360 clients bump the epoch and continue."),
    "OUT_OF_ORDER_SEQUENCE_NUMBER": (C.UNKNOWN, "Sequence gap (a batch was lost); abort the transaction; KIP-360 "
                                                 "clients bump the epoch and continue, older ones must be recreated."),
    # application-recoverable: the producer instance is dead; close it and create a new one.
    "PRODUCER_FENCED": (C.APPLICATION_RECOVERABLE, "Another instance with the same transactional.id took over, or the "
                        "coordinator aborted a timed-out transaction and bumped the epoch (KIP-588): close this producer; "
                        "check for duplicate transactional.id or transactions longer than transaction.timeout.ms."),
    "INVALID_PRODUCER_EPOCH": (C.APPLICATION_RECOVERABLE, "Stale epoch: this producer was fenced; close it and create a new one."),
    "TRANSACTION_COORDINATOR_FENCED": (C.APPLICATION_RECOVERABLE, "The coordinator was replaced mid-request; recreate the producer."),
    "INVALID_TXN_STATE": (C.APPLICATION_RECOVERABLE, "The request does not fit the transaction's state (e.g. commit "
                          "while PrepareAbort); inspect with `kafka-transactions.sh describe`.  On Produce under "
                          "KIP-890 it is abortable instead: the partition was not verified in the transaction."),
    "INVALID_PRODUCER_ID_MAPPING": (C.APPLICATION_RECOVERABLE, "The transactional id maps to another producer id; "
                                    "the producer must re-initialise (initTransactions)."),
    "TRANSACTIONAL_ID_NOT_FOUND": (C.APPLICATION_RECOVERABLE, "The coordinator does not know the transactional id "
                                   "(expired after transactional.id.expiration.ms)."),
    "UNKNOWN_MEMBER_ID": (C.APPLICATION_RECOVERABLE, "Group membership lost; rejoin before send_offsets_to_transaction."),
    "ILLEGAL_GENERATION": (C.APPLICATION_RECOVERABLE, "Stale group generation in send_offsets_to_transaction; abort and rejoin."),
    "FENCED_INSTANCE_ID": (C.APPLICATION_RECOVERABLE, "Another consumer uses the same group.instance.id."),
    # invalid-configuration: fix configuration or ACLs; retrying cannot help.
    "INVALID_TRANSACTION_TIMEOUT": (C.INVALID_CONFIGURATION, "transaction.timeout.ms exceeds the brokers' "
                                    "transaction.max.timeout.ms; lower it or raise the broker limit."),
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": (C.INVALID_CONFIGURATION, "Grant Write (and Describe) on the "
                                              "TransactionalId resource."),
    "CLUSTER_AUTHORIZATION_FAILED": (C.INVALID_CONFIGURATION, "Grant the needed Cluster ACL (IdempotentWrite, or "
                                     "Describe/Alter for admin calls)."),
    "TOPIC_AUTHORIZATION_FAILED": (C.INVALID_CONFIGURATION, "Grant Describe/Read/Write on the topic as needed."),
    "GROUP_AUTHORIZATION_FAILED": (C.INVALID_CONFIGURATION, "Grant Describe/Read on the consumer group."),
    "SASL_AUTHENTICATION_FAILED": (C.INVALID_CONFIGURATION, "Wrong SASL credentials or mechanism for this listener."),
    "UNSUPPORTED_SASL_MECHANISM": (C.INVALID_CONFIGURATION, "The listener does not enable this SASL mechanism."),
    "UNSUPPORTED_VERSION": (C.INVALID_CONFIGURATION, "The broker does not support this API version; check versions."),
    "INVALID_CONFIG": (C.INVALID_CONFIGURATION, "A configuration value was rejected."),
    "UNSUPPORTED_FOR_MESSAGE_FORMAT": (C.INVALID_CONFIGURATION, "The topic's message format predates transactions; "
                                       "upgrade log.message.format.version / the topic."),
    "INVALID_RECORD": (C.INVALID_CONFIGURATION, "The broker rejected a record (e.g. a compacted topic without key); "
                       "fix the producer or the topic configuration."),
    "RECORD_LIST_TOO_LARGE": (C.INVALID_CONFIGURATION, "Batch larger than the topic allows; lower batch.size or raise "
                              "max.message.bytes."),
    "INVALID_REQUIRED_ACKS": (C.INVALID_CONFIGURATION, "Transactions need acks=all."),
    "INVALID_TOPIC": (C.INVALID_CONFIGURATION, "Illegal topic name or a write to an internal topic."),
    "SECURITY_DISABLED": (C.INVALID_CONFIGURATION, "Security features are disabled on this listener."),
}

#: Names Kafka renamed since kafka-python's table was written (code 6 is NOT_LEADER_OR_FOLLOWER since 2.7).
_ALIASES = {"NOT_LEADER_OR_FOLLOWER": "NOT_LEADER_FOR_PARTITION"}

_UNKNOWN_ADVICE = "No KIP-1050 class for this error; see the broker logs and Kafka's protocol error documentation."


def _build() -> tuple[dict[int, ErrorInfo], dict[str, ErrorInfo]]:
    by_name: dict[str, int] = {}
    for value in vars(kafka_errors).values():
        if isinstance(value, type) and issubclass(value, kafka_errors.BrokerResponseError) and isinstance(value.errno, int) and value.errno >= 0:
            by_name.setdefault(value.message, value.errno)
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
