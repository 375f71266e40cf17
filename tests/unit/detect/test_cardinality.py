"""Group caps: the most lagging groups kept whole, the rest counted (issue 23, item 5)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.detect.builders import partition, snapshot
from txnwatch.core.model import GroupSnapshot, TopicPartition
from txnwatch.detect import INITIAL, DetectionSettings, evaluate
from txnwatch.detect.cardinality import (
    GROUP_PARTITIONS_OVER_CAP,
    GROUPS_FILTERED,
    GROUPS_OVER_CAP,
    GroupRank,
    kept_groups,
)


def rank(group_id: str, lag: int = 0, seconds: float = 0.0, partitions: int = 1) -> GroupRank:
    return GroupRank(group_id, lag, seconds, partitions)


# Ranked as rank_groups returns them: most lagging first.
BIG_FIRST = [rank("a", 900, partitions=40), rank("b", 500, partitions=5), rank("c", 10, partitions=5),
             rank("d", 0, partitions=1)]


@pytest.mark.parametrize(("max_groups", "max_partitions", "expected"), [
    pytest.param(10, 1000, {"a", "b", "c", "d"}, id="under-both-caps-everything-kept"),
    pytest.param(2, 1000, {"a", "b"}, id="group-cap-keeps-the-most-lagging"),
    pytest.param(10, 45, {"a", "b"}, id="partition-cap-counts-whole-groups"),
    pytest.param(10, 44, {"a"}, id="a-group-that-would-pass-the-partition-cap-ends-the-prefix"),
    pytest.param(10, 3, {"a"}, id="the-most-lagging-group-is-kept-even-over-the-partition-cap"),
    pytest.param(0, 1000, set(), id="max-groups-0-keeps-none"),
])
def test_kept_groups_are_a_prefix_within_both_caps(max_groups: int, max_partitions: int, expected: set[str]) -> None:
    assert kept_groups(BIG_FIRST, max_groups, max_partitions) == expected


def test_prefix_stops_at_the_first_group_that_does_not_fit() -> None:
    """Never a smaller, less lagging group in place of a bigger, more lagging one: the set is top-N."""
    ranked = [rank("a", 9, partitions=1), rank("b", 8, partitions=50), rank("c", 7, partitions=1)]
    assert kept_groups(ranked, 10, 10) == {"a"}


def orders(p: int) -> TopicPartition:
    return TopicPartition("orders", p)


def test_evaluate_caps_lags_and_exporter_rows_alike_and_counts_what_it_left_out() -> None:
    parts = tuple(partition(orders(p), hwm=1000, lso=1000) for p in range(3))
    groups = (
        GroupSnapshot("idle", "Empty", "consumer", {orders(0): 1000}),  # no lag
        GroupSnapshot("behind", "Stable", "consumer", {orders(0): 100, orders(1): 100, orders(2): 100}),
        GroupSnapshot("slightly", "Stable", "consumer", {orders(1): 990}),
        GroupSnapshot("tie-b", "Empty", "consumer", {orders(2): 1000}),
    )
    snap = replace(snapshot(partitions=parts, groups=groups), groups_filtered=7)
    settings = DetectionSettings(max_groups=2, max_group_partitions=100)
    _, findings = evaluate(INITIAL, snap, 0, settings)
    assert {g.group_id for g in findings.lags} == {"behind", "slightly"}
    assert {e.group_id for e in findings.exporter_lags} == {"behind", "slightly"}
    assert len([g for g in findings.lags if g.group_id == "behind"]) == 3  # kept whole
    # "idle" and "tie-b" both lag 0: left out, counted with their partitions (the exporter's rows:
    # every partition of a consumed topic, so 3 each).
    assert findings.omitted[GROUPS_OVER_CAP] == 2
    assert findings.omitted[GROUP_PARTITIONS_OVER_CAP] == 6
    assert findings.omitted[GROUPS_FILTERED] == 7


def test_ties_are_broken_by_time_lag_then_group_id() -> None:
    parts = (partition(orders(0), hwm=1000, lso=1000),)
    groups = tuple(GroupSnapshot(g, "Empty", "consumer", {orders(0): 1000}) for g in ("c", "a", "b"))
    _, findings = evaluate(INITIAL, snapshot(partitions=parts, groups=groups), 0,
                           DetectionSettings(max_groups=2))
    assert sorted(g.group_id for g in findings.lags) == ["a", "b"]


def test_defaults_leave_a_small_cluster_alone() -> None:
    parts = (partition(orders(0), hwm=10, lso=10),)
    groups = tuple(GroupSnapshot(f"g{i}", "Empty", "consumer", {orders(0): 5}) for i in range(20))
    _, findings = evaluate(INITIAL, snapshot(partitions=parts, groups=groups), 0)
    assert len(findings.lags) == 20 and findings.omitted[GROUPS_OVER_CAP] == 0


def test_negative_caps_are_refused() -> None:
    with pytest.raises(ValueError, match="max_groups"):
        DetectionSettings(max_groups=-1)


def test_the_defaults_serve_the_issue_25_lab_whole_with_margin() -> None:
    """300 groups of 40 committed partitions plus the workload's 3 (12,015 group partitions): the defaults keep
    every one, so every lag series can be compared with kafka_exporter's; 5,000 (issue 23's) kept 125 of them.
    The margin: half as many again still fits."""
    defaults = DetectionSettings()
    lab = [rank(f"g{i:03}", partitions=40) for i in range(300)] + [rank(f"w{i}", 5, partitions=5) for i in range(3)]
    assert kept_groups(lab, defaults.max_groups, defaults.max_group_partitions) == {r.group_id for r in lab}
    bigger = [rank(f"g{i:03}", partitions=40) for i in range(450)]
    assert len(kept_groups(bigger, defaults.max_groups, defaults.max_group_partitions)) == 450
    assert len(kept_groups(lab, defaults.max_groups, 5_000)) == 125
