"""Poll composition against a scripted cluster: rounds, batching, partial failure."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from kafka.errors import KafkaConnectionError, RequestTimedOutError
from kafka.future import Future

from tests.kafka import answers as a
from txnwatch.core.model import TopicPartition, TxnState
from txnwatch.kafka import ClusterConnectionSettings, ClusterUnreachable
from txnwatch.kafka.batches import Call
from txnwatch.kafka.errors import CORRUPT
from txnwatch.kafka.poll import Collected, collect
from txnwatch.kafka.wire import ManagerWire, Reply

TXN_STATE = "__transaction_state"


@dataclass
class Txn:
    coordinator: int
    producer_id: int
    partitions: tuple[TopicPartition, ...] = ()
    state: str = "Ongoing"


@dataclass
class FakeCluster:
    """A cluster that answers calls from its own state, optionally with some brokers down."""

    brokers: tuple[int, ...] = (1, 2, 3)
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    txns: dict[str, Txn] = field(default_factory=dict)
    groups: dict[str, tuple[int, dict[TopicPartition, int]]] = field(default_factory=dict)
    share_groups: dict[str, int] = field(default_factory=dict)
    down: set[int] = field(default_factory=set)
    max_timeout_ms: str = "15000"
    #: Highest version per request class, where lower than what txnwatch asks (ApiVersions).
    versions: dict[str, int] = field(default_factory=dict)
    release: tuple[int, int] = (4, 1)

    def answer(self, call: Call) -> Any:
        node, request = call.node_id, call.request
        if node in self.down:
            raise KafkaConnectionError("111 ECONNREFUSED")
        if call.api == "Metadata":
            leaders = {**self.leaders, **{TopicPartition(TXN_STATE, n): n for n in self.brokers}}
            return a.metadata(self.brokers, leaders, controller=self.brokers[0], internal=[TXN_STATE])
        if call.api == "ListTransactions":
            # A 4.1+ broker (KIP-1152) keeps only the ids the pattern matches; this fake knows one pattern.
            pattern = getattr(request, "transactional_id_pattern", None)
            assert pattern in (None, "(?s:team-a-.*)"), pattern
            return a.list_transactions([(t, x.producer_id, x.state) for t, x in self.txns.items()
                                        if x.coordinator == node and (pattern is None or t.startswith("team-a-"))])
        if call.api == "DescribeTransactions":
            return a.describe_transactions(*(
                a.txn(t, state=self.txns[t].state, producer_id=self.txns[t].producer_id,
                      partitions=self.txns[t].partitions) for t in request.transactional_ids))
        if call.api == "DescribeProducers":
            asked = [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
            return a.describe_producers({tp: [a.producer(x.producer_id, txn_start=5)
                                              for x in self.txns.values() if tp in x.partitions]
                                         for tp in asked})
        if call.api == "ListOffsets":
            asked = [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]
            open_ = {tp for x in self.txns.values() for tp in x.partitions}
            value = {"latest/read_uncommitted": lambda tp: 10,
                     "latest/read_committed": lambda tp: 5 if tp in open_ else 10,
                     "earliest": lambda tp: 0}[call.variant]
            return a.list_offsets({tp: value(tp) for tp in asked})
        if call.api == "ListGroups":
            rows: list[tuple[str, ...]] = [(g, "Stable", "consumer") for g, (c, _) in self.groups.items() if c == node]
            shared: list[tuple[str, ...]] = [(g, "Stable", "share", "share") for g, c in self.share_groups.items() if c == node]
            return a.list_groups(rows + shared)
        if call.api == "OffsetFetch":
            return a.offset_fetch({g.group_id: self.groups[g.group_id][1] for g in request.groups})
        if call.api == "DescribeConfigs":
            return a.describe_configs({"transaction.max.timeout.ms": self.max_timeout_ms}, broker=node)
        if call.api == "ApiVersions":
            return a.api_versions(self.release)
        raise AssertionError(f"unexpected call {call.api}")


class FakeWire:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.round_trips = 0
        self.rounds: list[list[Call]] = []

    async def exchange(self, calls: Sequence[Call]) -> list[Reply]:
        self.round_trips += 1
        self.rounds.append(list(calls))
        replies = []
        for call in calls:
            try:
                replies.append(Reply(call, response=self.cluster.answer(call)))
            except Exception as exc:
                replies.append(Reply(call, failure=exc))
        return replies

    def candidate_nodes(self) -> list[int]:
        return list(self.cluster.brokers)

    def learn_metadata(self, response: Any) -> None:
        pass

    def supports(self, request_class: Any, version: int) -> bool:
        return version <= self.cluster.versions.get(request_class.__name__, version)


SETTINGS = ClusterConnectionSettings(name="lab", bootstrap_servers=("127.0.0.1:9092",))


def run(wire: FakeWire, settings: ClusterConnectionSettings = SETTINGS, known: int | None = None) -> Collected:
    return asyncio.run(collect(wire, settings, taken_at_ms=1_000, known_max_timeout_ms=known))


def cluster_with(txn_count: int, partitions_per_broker: int = 4) -> FakeCluster:
    leaders = {TopicPartition("orders", p): 1 + p % 3 for p in range(3 * partitions_per_broker)}
    tps = sorted(leaders)
    txns = {f"app-{i}": Txn(coordinator=1 + i % 3, producer_id=100 + i, partitions=(tps[i % len(tps)],))
            for i in range(txn_count)}
    groups = {"etl": (2, {tps[0]: 3}), "audit": (3, {tps[1]: 4})}
    return FakeCluster(leaders=leaders, txns=txns, groups=groups)


@pytest.mark.parametrize(("txn_count", "partitions_per_broker"), [(1, 1), (500, 200)])
def test_three_rounds_one_request_per_broker_and_question(txn_count: int, partitions_per_broker: int) -> None:
    wire = FakeWire(cluster_with(txn_count, partitions_per_broker))
    collected = run(wire)
    assert wire.round_trips == 3
    assert [sorted({c.api for c in r}) for r in wire.rounds] == [
        ["Metadata"],
        ["ApiVersions", "DescribeConfigs", "DescribeProducers", "ListGroups", "ListOffsets", "ListTransactions"],
        ["DescribeTransactions", "OffsetFetch"]]
    for round_ in wire.rounds:
        keys = [(c.api, c.node_id, c.variant) for c in round_]
        assert len(keys) == len(set(keys)), "one request per broker per question"
    assert len(collected.snapshot.transactions) == txn_count


def test_snapshot_content() -> None:
    cluster = cluster_with(2)
    wire = FakeWire(cluster)
    snap = run(wire).snapshot
    assert snap.errors == () and snap.listing_complete and snap.unreachable_coordinators == frozenset()
    assert [b.node_id for b in snap.brokers] == [1, 2, 3] and snap.controller_id == 1
    assert snap.max_transaction_timeout_ms == 15_000
    assert {t.transactional_id: t.coordinator_id for t in snap.listed} == {"app-0": 1, "app-1": 2}
    described = snap.transactions["app-0"]
    assert described.state is TxnState.ONGOING and described.partitions == {TopicPartition("orders", 0)}
    open_partition = snap.partitions[TopicPartition("orders", 0)]
    assert (open_partition.high_watermark, open_partition.last_stable_offset, open_partition.log_start_offset) == (
        10, 5, 0)
    assert open_partition.producers is not None and open_partition.producers[0].current_txn_start_offset == 5
    quiet = snap.partitions[TopicPartition("orders", 5)]
    assert quiet.last_stable_offset == quiet.high_watermark == 10 and quiet.producers == ()
    assert all(tp.topic != TXN_STATE for tp in snap.partitions), "internal topics are never watched"
    assert snap.groups["etl"].offsets == {TopicPartition("orders", 0): 3}
    assert snap.groups["etl"].state == "Stable" and snap.groups["etl"].protocol_type == "consumer"


def test_known_max_timeout_is_not_asked_again() -> None:
    wire = FakeWire(cluster_with(1))
    collected = run(wire, known=20_000)
    assert "DescribeConfigs" not in {c.api for r in wire.rounds for c in r}
    assert collected.snapshot.max_transaction_timeout_ms == 20_000


def test_down_broker_costs_what_it_covers() -> None:
    cluster = cluster_with(6)
    cluster.down = {3}
    wire = FakeWire(cluster)
    snap = run(wire).snapshot
    assert wire.round_trips == 3
    assert not snap.listing_complete and snap.unreachable_coordinators == {3}
    assert {t.coordinator_id for t in snap.listed} == {1, 2}
    assert set(snap.transactions) == {"app-0", "app-1", "app-3", "app-4"}
    led_by_3 = snap.partitions[TopicPartition("orders", 2)]
    assert led_by_3.leader == 3 and led_by_3.high_watermark is None and led_by_3.producers is None
    assert snap.partitions[TopicPartition("orders", 0)].high_watermark == 10
    failed = {(e.api, e.target) for e in snap.errors}
    assert {("ListTransactions", "broker:3"), ("ListGroups", "broker:3"), ("DescribeProducers", "broker:3"),
            ("ListOffsets", "broker:3")} <= failed
    assert "audit" not in snap.groups


def test_failed_describe_marks_the_coordinator_unreachable() -> None:
    cluster = cluster_with(3)

    class DescribeFails(FakeWire):
        async def exchange(self, calls: Sequence[Call]) -> list[Reply]:
            replies = await super().exchange(calls)
            return [Reply(r.call, failure=RequestTimedOutError("slow")) if
                    r.call.api == "DescribeTransactions" and r.call.node_id == 2 else r for r in replies]

    snap = run(DescribeFails(cluster)).snapshot
    assert snap.listing_complete and snap.unreachable_coordinators == {2}
    assert "app-1" not in snap.transactions and "app-0" in snap.transactions
    [error] = [e for e in snap.errors if e.api == "DescribeTransactions"]
    assert (error.target, error.code, error.name) == ("broker:2", 7, "REQUEST_TIMED_OUT")


def test_leaderless_coordinator_partition_makes_listing_incomplete() -> None:
    cluster = cluster_with(1)

    class Orphaned(FakeCluster):
        def answer(self, call: Call) -> Any:
            if call.api == "Metadata":
                leaders = {**self.leaders, TopicPartition(TXN_STATE, 0): -1}
                return a.metadata(self.brokers, leaders, internal=[TXN_STATE],
                                  partition_errors={TopicPartition(TXN_STATE, 0): 5})
            return super().answer(call)

    orphaned = Orphaned(leaders=cluster.leaders, txns=cluster.txns)
    snap = run(FakeWire(orphaned)).snapshot
    assert not snap.listing_complete
    assert any(e.target == f"{TXN_STATE}-0" for e in snap.errors)


def test_whole_cluster_down_raises_with_reasons() -> None:
    cluster = cluster_with(1)
    cluster.down = {1, 2, 3}
    wire = FakeWire(cluster)
    with pytest.raises(ClusterUnreachable) as caught:
        run(wire)
    assert caught.value.cluster == "lab" and "ECONNREFUSED" in caught.value.reason
    assert wire.round_trips == 2, "gives up after two metadata attempts"


def test_metadata_falls_back_to_another_broker() -> None:
    cluster = cluster_with(1)
    cluster.down = {1}
    wire = FakeWire(cluster)
    snap = run(wire).snapshot
    assert wire.round_trips == 4 and [b.node_id for b in snap.brokers] == [1, 2, 3]


def test_topic_selection() -> None:
    cluster = cluster_with(0)
    cluster.leaders.update({TopicPartition("orders.retry", 0): 1, TopicPartition("audit", 0): 2})
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=("h:1",),
                                         topics_include=("orders.*",), topics_exclude=(r".*\.retry",))
    wire = FakeWire(cluster)
    snap = run(wire, settings).snapshot
    assert {tp.topic for tp in snap.partitions} == {"orders"}
    asked = {t.name for r in wire.rounds for c in r if c.api == "DescribeProducers" for t in c.request.topics}
    assert asked == {"orders"}


def _tenants() -> FakeCluster:
    txns = {name: Txn(coordinator=1 + i % 3, producer_id=100 + i, partitions=(TopicPartition("orders", i % 3),))
            for i, name in enumerate(["team-a-1", "team-a-2", "team-b-1", "xteam-a-3", "team-a"])}
    return FakeCluster(leaders={TopicPartition("orders", p): 1 + p for p in range(3)}, txns=txns)


@pytest.mark.parametrize(("list_transactions_version", "sent"), [
    pytest.param(2, "(?s:team-a-.*)", id="kafka-4.1-filters-itself"),  # RE2/J's '.' matches a newline as ours
    pytest.param(1, None, id="kafka-3.8-filtered-by-txnwatch"),
    pytest.param(0, None, id="kafka-3.0-filtered-by-txnwatch"),
])
def test_id_pattern_same_ids_whatever_the_broker_speaks(list_transactions_version: int, sent: str | None) -> None:
    cluster = _tenants()
    cluster.versions["ListTransactionsRequest"] = list_transactions_version
    wire = FakeWire(cluster)
    snap = run(wire, ClusterConnectionSettings(name="lab", bootstrap_servers=("h:1",),
                                               transactional_id_pattern="team-a-.*")).snapshot
    listings = [c for c in wire.rounds[1] if c.api == "ListTransactions"]
    assert len(listings) == 3 and {getattr(c.request, "transactional_id_pattern", None) for c in listings} == {sent}
    if sent is not None:  # pinned to v2: kafka-python cannot drop the field by negotiating down
        request = listings[0].request
        assert request._min_version == 2 and type(request).decode(request.encode(version=2), version=2)\
            .transactional_id_pattern == sent
    assert sorted(t.transactional_id for t in snap.listed) == ["team-a-1", "team-a-2"]
    described = [i for c in wire.rounds[2] if c.api == "DescribeTransactions" for i in c.request.transactional_ids]
    assert sorted(described) == ["team-a-1", "team-a-2"], "ids out of scope are never described"
    assert snap.transactional_id_pattern == "team-a-.*"


def test_no_pattern_lists_and_describes_every_id() -> None:
    wire = FakeWire(_tenants())
    snap = run(wire).snapshot
    assert len(snap.listed) == 5 and snap.transactional_id_pattern is None
    assert all(getattr(c.request, "transactional_id_pattern", None) is None
               for c in wire.rounds[1] if c.api == "ListTransactions")


def test_share_groups_are_listed_but_not_fetched() -> None:
    cluster = cluster_with(0)
    cluster.share_groups = {"shared": 2}
    wire = FakeWire(cluster)
    snap = run(wire).snapshot
    fetched = {g.group_id for r in wire.rounds for c in r if c.api == "OffsetFetch" for g in c.request.groups}
    assert "shared" not in fetched and "shared" not in snap.groups and "etl" in snap.groups


def test_group_selection_fetches_only_selected_groups_and_counts_the_rest() -> None:
    """groups_include/groups_exclude (kafka_exporter's --group.filter/--group.exclude, KMinion's
    allowedGroups/ignoredGroups), whole-name matches: left-out groups cost no OffsetFetch."""
    cluster = cluster_with(0)
    tp = TopicPartition("orders", 0)
    cluster.groups.update({"etl-retry": (2, {tp: 1}), "etl-console-1": (3, {tp: 2}), "xetl": (1, {tp: 5})})
    settings = ClusterConnectionSettings(name="lab", bootstrap_servers=("h:1",),
                                         groups_include=("etl.*", "audit"), groups_exclude=(r".*-console-\d+",))
    wire = FakeWire(cluster)
    snap = run(wire, settings).snapshot
    fetched = {g.group_id for r in wire.rounds for c in r if c.api == "OffsetFetch" for g in c.request.groups}
    assert fetched == set(snap.groups) == {"etl", "etl-retry", "audit"}  # "xetl": a full match, not a search
    assert snap.groups_filtered == 2


def test_the_default_include_fetches_a_group_whose_id_holds_a_newline() -> None:
    """Include-all means all (issue 38 item 8): ``.*`` without DOTALL left such a group out of every lag series."""
    cluster = cluster_with(0)
    tp = TopicPartition("orders", 0)
    cluster.groups.update({"tenant\nhidden": (2, {tp: 1}), "\r\x1b[2Kesc": (3, {tp: 2})})
    wire = FakeWire(cluster)
    snap = run(wire).snapshot
    fetched = {g.group_id for r in wire.rounds for c in r if c.api == "OffsetFetch" for g in c.request.groups}
    assert fetched == set(snap.groups) == {"etl", "audit", "tenant\nhidden", "\r\x1b[2Kesc"}
    assert snap.groups_filtered == 0


class _InstantManager:
    """Answers every send at once; records them."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any]] = []

    def send(self, request: Any, node_id: int, request_timeout_ms: int) -> Future:
        self.sent.append((node_id, request))
        if node_id == 99:
            raise KafkaConnectionError("no such broker")
        return Future().success(("answer", node_id))

    async def wait_for(self, future: Future, timeout_ms: float) -> Any:
        return await future


def test_manager_wire_sends_in_waves_of_max_in_flight() -> None:
    manager = _InstantManager()
    wire = ManagerWire(manager, timeout_ms=1000, max_in_flight=2)
    calls = [Call("X", 1, i) for i in range(5)] + [Call("X", 2, 10), Call("X", 99, 11)]
    replies = asyncio.run(wire.exchange(calls))
    assert wire.round_trips == 3
    assert [r.response for r in replies[:6]] == [("answer", 1)] * 5 + [("answer", 2)]
    assert isinstance(replies[6].failure, KafkaConnectionError)
    assert [r.call for r in replies] == calls


@pytest.mark.parametrize("api", ["ListTransactions", "ListGroups", "DescribeProducers", "ListOffsets",
                                 "DescribeConfigs", "DescribeTransactions", "OffsetFetch"])
@pytest.mark.parametrize("junk", [None, "garbage", 42, object()])
def test_nonsense_answers_become_errors_not_crashes(api: str, junk: Any) -> None:
    cluster = cluster_with(3)

    class Nonsense(FakeWire):
        async def exchange(self, calls: Sequence[Call]) -> list[Reply]:
            replies = await super().exchange(calls)
            return [Reply(r.call, response=junk) if r.call.api == api else r for r in replies]

    snap = run(Nonsense(cluster)).snapshot
    assert any(e.api == api and e.name == CORRUPT for e in snap.errors)
    assert snap.partitions and snap.brokers
    if api == "ListTransactions":
        assert not snap.listing_complete
