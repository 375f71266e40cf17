"""Parsers of kafka-transactions' table output (outputs captured from a Kafka 4.1.1 lab)."""

from __future__ import annotations

from txnwatch.lab.reference import parse_describe, parse_describe_producers, parse_find_hanging, parse_list

LIST = ("TransactionalId\tCoordinator\tProducerId\tTransactionState\t\n"
        "tx-a           \t3          \t0         \tOngoing         \t\n")
DESCRIBE = ("CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\t"
            "CurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions\t\n"
            "3            \ttx-a           \t0         \t0            \tOngoing         \t15000               \t"
            "1795391494181                \t2897                 \tt1-0,my-topic-2\t\n")
PRODUCERS = ("ProducerId\tProducerEpoch\tLatestCoordinatorEpoch\tLastSequence\tLastTimestamp\t"
             "CurrentTransactionStartOffset\t\n"
             "0         \t1            \t0                     \t-1          \t1795391510376\tNone                         \t\n"
             "1000      \t0            \t-1                    \t0           \t1795391591531\t0                            \t\n")
HANGING = ("Topic\tPartition\tProducerId\tProducerEpoch\tCoordinatorEpoch\tStartOffset\tLastTimestamp\tDuration(min)\t\n"
           "t2   \t0        \t1000      \t0            \t-1              \t0          \t1795391591531\t0            \t\n")


def test_list():
    assert parse_list(LIST) == [{"transactional_id": "tx-a", "coordinator": 3, "producer_id": 0,
                                 "transaction_state": "Ongoing"}]


def test_describe_splits_topic_partitions_on_the_last_dash():
    row = parse_describe(DESCRIBE)
    assert row["topic_partitions"] == [("my-topic", 2), ("t1", 0)]
    assert (row["coordinator_id"], row["transaction_timeout_ms"], row["transaction_duration_ms"]) == (3, 15000, 2897)
    assert row["current_transaction_start_time_ms"] == 1795391494181


def test_describe_producers_maps_none_to_none():
    rows = parse_describe_producers(PRODUCERS)
    assert rows[0]["current_transaction_start_offset"] is None and rows[0]["last_sequence"] == -1
    assert rows[1] == {"producer_id": 1000, "producer_epoch": 0, "latest_coordinator_epoch": -1, "last_sequence": 0,
                       "last_timestamp": 1795391591531, "current_transaction_start_offset": 0}


def test_find_hanging_and_empty_tables():
    assert parse_find_hanging(HANGING) == [{"topic": "t2", "partition": 0, "producer_id": 1000, "producer_epoch": 0,
                                            "coordinator_epoch": -1, "start_offset": 0,
                                            "last_timestamp": 1795391591531, "duration_min": 0}]
    assert parse_find_hanging(HANGING.splitlines()[0] + "\n") == []
    assert parse_list("") == []


FEATURES_411 = (  # `kafka-features describe` on a default-formatted Kafka 4.1.1 broker
    "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t"
    "FinalizedVersionLevel: 1\tEpoch: 34\n"
    "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1\t"
    "FinalizedVersionLevel: 4.1-IV1\tEpoch: 34\n"
    "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2\tFinalizedVersionLevel: 2\t"
    "Epoch: 34\n")


def test_features_keep_levels_as_kafka_prints_them():
    from txnwatch.lab.reference import parse_features

    assert parse_features(FEATURES_411) == {"eligible.leader.replicas.version": 1, "metadata.version": "4.1-IV1",
                                           "transaction.version": 2}
    assert parse_features("") == {}
