"""The balancing rule on a simulated lease table: the fleet converges to fair shares and never leaves a cluster unwatched."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.fixtures.lanes import examples
from txnwatch.fleet.balance import HOUSEKEEPING, LeaseView, fair_share, plan

ORPHAN_AFTER = 2.0


@pytest.mark.parametrize(("clusters", "replicas", "share"), [
    pytest.param(3, 3, 1, id="one-each"),
    pytest.param(3, 2, 2, id="rounds-up"),
    pytest.param(10, 3, 4, id="ten-over-three"),
    pytest.param(2, 5, 1, id="more-replicas-than-clusters"),
    pytest.param(4, 0, 4, id="no-live-count-yet-means-me-alone"),
])
def test_fair_share(clusters: int, replicas: int, share: int) -> None:
    assert fair_share(clusters, replicas) == share


class Table:
    """The lease table in steps of one renew interval: a lease is valid while its holder renews it."""

    def __init__(self, clusters: list[str]) -> None:
        self.clusters = clusters
        self.holder: dict[str, str | None] = dict.fromkeys([*clusters, HOUSEKEEPING])
        self.free_since: dict[str, float] = dict.fromkeys(self.holder, -100.0)
        self.now = 0.0

    def views(self) -> dict[str, LeaseView]:
        return {c: LeaseView(c, h, -1.0 if h is not None else self.now - self.free_since[c])
                for c, h in self.holder.items()}

    def round_of(self, me: str, live: set[str]) -> None:
        decided = plan(me, self.clusters, self.views(), live, orphan_after_s=ORPHAN_AFTER)
        for c in decided.release:
            assert self.holder[c] == me, "a replica gives up only what it holds"
            self.holder[c], self.free_since[c] = None, self.now
        for c in decided.acquire:
            if self.holder[c] is None:  # the database's conditional UPDATE: only an expired lease is taken
                self.holder[c] = me
            else:
                assert self.holder[c] != me, "never asks again for what it holds"

    def die(self, replica: str) -> None:
        for c, h in self.holder.items():
            if h == replica:
                self.holder[c], self.free_since[c] = None, self.now

    def counts(self, replicas: set[str]) -> dict[str, int]:
        return {r: sum(1 for c in self.clusters if self.holder[c] == r) for r in replicas}


def run(table: Table, replicas: set[str], rounds: int, rng: random.Random) -> None:
    for _ in range(rounds):
        order = sorted(replicas)
        rng.shuffle(order)
        for me in order:
            table.round_of(me, replicas)
        table.now += 1.0


def assert_balanced(table: Table, replicas: set[str]) -> None:
    assert all(table.holder[c] in replicas for c in table.clusters), table.holder
    counts = table.counts(replicas)
    share = fair_share(len(table.clusters), len(replicas))
    assert max(counts.values()) <= share, counts
    assert table.holder[HOUSEKEEPING] in replicas


@settings(max_examples=examples(150), deadline=None)
@given(n_clusters=st.integers(1, 9), n_replicas=st.integers(1, 5), seed=st.integers(0, 2**32),
       victim=st.integers(0, 4))
def test_fleet_converges_and_survives_a_death(n_clusters: int, n_replicas: int, seed: int, victim: int) -> None:
    rng = random.Random(seed)
    clusters = [f"c{i}" for i in range(n_clusters)]
    replicas = {f"r{i}" for i in range(n_replicas)}
    table = Table(clusters)
    # Replicas join one by one, as a rollout starts them.
    joined: set[str] = set()
    for r in sorted(replicas):
        joined.add(r)
        run(table, joined, 2, rng)
    run(table, replicas, n_clusters + 2, rng)
    assert_balanced(table, replicas)

    if n_replicas > 1:
        dead = sorted(replicas)[victim % n_replicas]
        table.die(dead)
        replicas.discard(dead)
        run(table, replicas, n_clusters + 2, rng)
        assert_balanced(table, replicas)


def test_takes_orphans_over_its_share() -> None:
    """The live count says three, but the third replica's leases lapsed: somebody takes them anyway."""
    views = {"a": LeaseView("a", "me", -5.0), "b": LeaseView("b", "other", -5.0),
             "c": LeaseView("c", "ghost", ORPHAN_AFTER + 0.5), HOUSEKEEPING: LeaseView(HOUSEKEEPING, "other", -5.0)}
    decided = plan("me", ["a", "b", "c"], views, {"me", "other", "ghost"}, orphan_after_s=ORPHAN_AFTER)
    assert decided.acquire == ("c",) and decided.release == ()


def test_gives_up_only_when_someone_is_short() -> None:
    views = {c: LeaseView(c, "me", -5.0) for c in ("a", "b", "c")}
    alone = plan("me", ["a", "b", "c"], views, {"me"}, orphan_after_s=ORPHAN_AFTER)
    assert alone.release == ()
    joined = plan("me", ["a", "b", "c"], views, {"me", "new"}, orphan_after_s=ORPHAN_AFTER)
    assert len(joined.release) == 1  # one per round, so the fleet never thrashes


def test_a_valid_lease_of_another_replica_is_never_asked_for() -> None:
    views = {"a": LeaseView("a", "other", -0.01), HOUSEKEEPING: LeaseView(HOUSEKEEPING, "other", -0.01)}
    decided = plan("me", ["a"], views, {"me"}, orphan_after_s=ORPHAN_AFTER)
    assert decided.acquire == ()
