"""Wire answers → snapshot dataclasses, including refusals and garbled answers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.kafka import answers as a
from txnwatch.core.model import ErrorClass, ProducerState, TopicPartition, TxnState
from txnwatch.kafka import parse
from txnwatch.kafka.errors import CORRUPT

T0, T1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
TXN_STATE = TopicPartition("__transaction_state", 0)


class TestMetadata:
    def test_brokers_leaders_and_internal_topics(self) -> None:
        parsed = parse.parse_metadata(a.metadata([3, 1], {T0: 1, T1: 3, TXN_STATE: 1}, controller=3,
                                                 internal=["__transaction_state"]))
        layout = parsed.value
        assert layout is not None and parsed.errors == ()
        assert [b.node_id for b in layout.brokers] == [1, 3]
        assert layout.brokers[0].host == "127.0.0.1" and layout.brokers[0].port == 9001
        assert layout.controller_id == 3
        assert layout.leaders == {T0: 1, T1: 3, TXN_STATE: 1}
        assert layout.internal_topics == {"__transaction_state"}

    def test_leaderless_partition_is_none_with_its_error(self) -> None:
        parsed = parse.parse_metadata(a.metadata([1], {T0: -1, T1: 1}, partition_errors={T0: 5}))
        assert parsed.value is not None and parsed.value.leaders[T0] is None
        assert parsed.value.controller_id is None
        [error] = parsed.errors
        assert (error.api, error.target, error.code, error.name) == ("Metadata", "orders-0", 5, "LEADER_NOT_AVAILABLE")

    def test_topic_error_skips_the_topic(self) -> None:
        parsed = parse.parse_metadata(a.metadata([1], {T0: 1}, topic_errors={"secret": 29}))
        assert parsed.value is not None and set(parsed.value.leaders) == {T0}
        assert [(e.target, e.name) for e in parsed.errors] == [("secret", "TOPIC_AUTHORIZATION_FAILED")]

    def test_garbled_broker_list_fails_the_whole_answer(self) -> None:
        answer = SimpleNamespace(brokers=[SimpleNamespace(node_id=1, host="h", port="9092", rack=None)],
                                 controller_id=1, topics=[])
        parsed = parse.parse_metadata(answer)
        assert parsed.value is None and parsed.errors[0].name == CORRUPT

    def test_no_brokers_is_not_a_cluster(self) -> None:
        parsed = parse.parse_metadata(SimpleNamespace(brokers=[], controller_id=-1, topics=[]))
        assert parsed.value is None and parsed.errors[0].name == CORRUPT


class TestListTransactions:
    def test_rows_belong_to_the_listing_broker(self) -> None:
        parsed = parse.parse_list_transactions(
            a.list_transactions([("app-1", 7, "Ongoing"), ("app-2", 8, "CompleteCommit")]), broker_id=2)
        assert [(t.transactional_id, t.producer_id, t.state, t.coordinator_id) for t in parsed.value or ()] == [
            ("app-1", 7, TxnState.ONGOING, 2), ("app-2", 8, TxnState.COMPLETE_COMMIT, 2)]

    def test_unknown_state_name_is_unknown_not_an_error(self) -> None:
        parsed = parse.parse_list_transactions(a.list_transactions([("app", 1, "Teleporting")]), broker_id=1)
        assert parsed.value is not None and parsed.value[0].state is TxnState.UNKNOWN and parsed.errors == ()

    def test_refused_listing_is_none_not_empty(self) -> None:
        parsed = parse.parse_list_transactions(a.list_transactions([], error_code=14), broker_id=4)
        assert parsed.value is None
        [error] = parsed.errors
        assert (error.api, error.target, error.name) == ("ListTransactions", "broker:4", "COORDINATOR_LOAD_IN_PROGRESS")

    def test_garbled_row_costs_only_that_row(self) -> None:
        answer = SimpleNamespace(error_code=0, transaction_states=[
            SimpleNamespace(transactional_id="ok", producer_id=1, transaction_state="Ongoing"),
            SimpleNamespace(transactional_id="bad", producer_id="one", transaction_state="Ongoing"),
            SimpleNamespace(transactional_id="", producer_id=2, transaction_state="Ongoing")])
        parsed = parse.parse_list_transactions(answer, broker_id=1)
        assert [t.transactional_id for t in parsed.value or ()] == ["ok"]
        assert [e.name for e in parsed.errors] == [CORRUPT, CORRUPT]


class TestDescribeTransactions:
    def test_description_with_partitions(self) -> None:
        parsed = parse.parse_describe_transactions(a.describe_transactions(
            a.txn("app", state="PrepareCommit", producer_id=5, epoch=3, timeout_ms=30_000, start_ms=123,
                  partitions=[T0, T1])), coordinator_id=2)
        d = parsed.value["app"]
        assert (d.coordinator_id, d.state, d.producer_id, d.producer_epoch, d.timeout_ms, d.start_time_ms) == (
            2, TxnState.PREPARE_COMMIT, 5, 3, 30_000, 123)
        assert d.partitions == {T0, T1}

    def test_no_start_time_is_none(self) -> None:
        parsed = parse.parse_describe_transactions(a.describe_transactions(
            a.txn("idle", state="Empty", start_ms=-1)), coordinator_id=1)
        assert parsed.value["idle"].start_time_ms is None and parsed.value["idle"].partitions == frozenset()

    def test_per_id_error_is_kept_and_others_described(self) -> None:
        parsed = parse.parse_describe_transactions(a.describe_transactions(
            a.txn("gone", error_code=105), a.txn("here")), coordinator_id=1)
        assert set(parsed.value) == {"here"}
        [error] = parsed.errors
        assert (error.api, error.target, error.code, error.name) == (
            "DescribeTransactions", "gone", 105, "TRANSACTIONAL_ID_NOT_FOUND")

    def test_impossible_start_time_is_reported(self) -> None:
        parsed = parse.parse_describe_transactions(a.describe_transactions(a.txn("odd", start_ms=-7)), 1)
        assert parsed.value == {} and parsed.errors[0].target == "odd" and parsed.errors[0].name == CORRUPT

    def test_answer_without_rows_is_reported(self) -> None:
        parsed = parse.parse_describe_transactions(SimpleNamespace(), coordinator_id=3)
        assert parsed.value == {} and parsed.errors[0].target == "broker:3"


class TestDescribeProducers:
    def test_open_and_closed_producers(self) -> None:
        parsed = parse.parse_describe_producers(a.describe_producers({
            T0: [a.producer(7, epoch=1, last_sequence=9, last_timestamp=555, coordinator_epoch=2, txn_start=40),
                 a.producer(8, last_timestamp=-1)]}), broker_id=1)
        assert parsed.value[T0] == (
            ProducerState(7, 1, 9, 555, 2, 40),
            ProducerState(8, 0, 0, None, -1, None))
        assert parsed.value[T0][0].has_open_txn and not parsed.value[T0][1].has_open_txn

    def test_partition_error_leaves_partition_unknown(self) -> None:
        parsed = parse.parse_describe_producers(a.describe_producers({T0: 6, T1: []}), broker_id=1)
        assert parsed.value == {T1: ()}
        assert [(e.target, e.name) for e in parsed.errors] == [("orders-0", "NOT_LEADER_FOR_PARTITION")]

    def test_impossible_offset_is_reported_not_trusted(self) -> None:
        parsed = parse.parse_describe_producers(a.describe_producers({T0: [a.producer(1, txn_start=-3)]}), 1)
        assert T0 not in parsed.value and parsed.errors[0].name == CORRUPT and parsed.errors[0].target == "orders-0"

    def test_wrong_types_are_reported(self) -> None:
        row = SimpleNamespace(producer_id=None, producer_epoch=0, last_sequence=0, last_timestamp=0,
                              coordinator_epoch=0, current_txn_start_offset=0)
        answer = SimpleNamespace(topics=[SimpleNamespace(name="orders", partitions=[
            SimpleNamespace(partition_index=0, error_code=0, active_producers=[row])])])
        parsed = parse.parse_describe_producers(answer, broker_id=1)
        assert parsed.value == {} and parsed.errors[0].name == CORRUPT


class TestListOffsets:
    def test_offsets_and_sentinel(self) -> None:
        parsed = parse.parse_list_offsets(a.list_offsets({T0: 42, T1: -1}), broker_id=1, spec="latest/read_committed")
        assert parsed.value == {T0: 42, T1: None} and parsed.errors == ()

    def test_error_names_the_question(self) -> None:
        parsed = parse.parse_list_offsets(a.list_offsets({T0: 1}, errors={T1: 6}), 1, "latest/read_committed")
        assert parsed.value == {T0: 1}
        [error] = parsed.errors
        assert error.target == "orders-1" and error.message.startswith("latest/read_committed")


class TestGroups:
    def test_listed_groups(self) -> None:
        parsed = parse.parse_list_groups(a.list_groups([("etl", "Stable", "consumer"), ("raw", "Empty", "")]), 2)
        groups = parsed.value or ()
        assert [(g.group_id, g.state, g.protocol_type, g.coordinator_id) for g in groups] == [
            ("etl", "Stable", "consumer", 2), ("raw", "Empty", None, 2)]

    def test_refused_group_listing(self) -> None:
        parsed = parse.parse_list_groups(a.list_groups([], error_code=15), 2)
        assert parsed.value is None and parsed.errors[0].name == "COORDINATOR_NOT_AVAILABLE"

    def test_offsets_of_many_groups(self) -> None:
        parsed = parse.parse_offset_fetch(a.offset_fetch({"etl": {T0: 10, T1: -1}, "locked": 30}))
        assert parsed.value == {"etl": {T0: 10}}
        [error] = parsed.errors
        assert (error.api, error.target, error.name) == ("OffsetFetch", "locked", "GROUP_AUTHORIZATION_FAILED")

    def test_offsets_of_one_group_before_v8(self) -> None:
        answer = SimpleNamespace(error_code=0, topics=[SimpleNamespace(name="orders", partitions=[
            SimpleNamespace(partition_index=0, committed_offset=5, error_code=0)])])
        assert parse.parse_offset_fetch(answer, group_id="old").value == {"old": {T0: 5}}


class TestConfigsAndMarkers:
    def test_max_timeout(self) -> None:
        parsed = parse.parse_int_config(a.describe_configs({"transaction.max.timeout.ms": "15000"}), 1,
                                        "transaction.max.timeout.ms")
        assert parsed.value == 15_000 and parsed.errors == ()

    def test_missing_config_is_none_without_error(self) -> None:
        assert parse.parse_int_config(a.describe_configs({}), 1, "transaction.max.timeout.ms") == parse.Parsed(None)

    @pytest.mark.parametrize("value", ["soon", "-5"])
    def test_nonsense_config_is_reported(self, value: str) -> None:
        parsed = parse.parse_int_config(a.describe_configs({"transaction.max.timeout.ms": value}), 1,
                                        "transaction.max.timeout.ms")
        assert parsed.value is None and parsed.errors[0].name == CORRUPT

    def test_marker_written(self) -> None:
        assert parse.parse_write_txn_markers(a.write_txn_markers(7, T0), T0, 7) == parse.Parsed(True)

    def test_marker_refused(self) -> None:
        parsed = parse.parse_write_txn_markers(a.write_txn_markers(7, T0, error_code=47), T0, 7)
        assert parsed.value is False and parsed.errors[0].name == "INVALID_PRODUCER_EPOCH"

    def test_marker_answer_about_something_else(self) -> None:
        parsed = parse.parse_write_txn_markers(a.write_txn_markers(8, T1), T0, 7)
        assert parsed.value is False and parsed.errors[0].name == CORRUPT


def test_error_class_is_looked_up_not_invented() -> None:
    parsed = parse.parse_list_transactions(a.list_transactions([], error_code=14), broker_id=1)
    assert isinstance(parsed.errors[0].error_class, ErrorClass)
