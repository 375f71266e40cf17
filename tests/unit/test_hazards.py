"""The known hazards' table: (release line, finalized transaction.version) -> hazards, one row per case, with why.

KAFKA-20310: brokers 4.0-4.2.x with transaction.version 2 write no Previous/NextProducerId (a rotation after a
coordinator failover can fence).  KAFKA-20090: a TV2 id near epoch 32,767 can get stuck Ongoing; its fix was
merged in February 2026 and is in 4.4.0's transaction coordinator, not in 4.1.1's (the strings of each jar's
TransactionMetadata); 4.2.x and 4.3.x are not established either way, so they are flagged.
"""

from __future__ import annotations

import pytest

from txnwatch.core.hazards import EPOCH_MAX, cluster_hazards, epoch_headroom, hazards
from txnwatch.core.model import BrokerRelease, TransactionDescription, TxnState
from txnwatch.core.vocabulary import HAZARDS, KnownHazard

A, B = KnownHazard.KAFKA_20310, KnownHazard.KAFKA_20090


@pytest.mark.parametrize(("release", "tv", "expected"), [
    pytest.param((3, 9), None, (), id="1. 3.9: no transaction.version finalized, neither bug"),
    pytest.param((3, 9), 0, (), id="2. TV0: both bugs are TV2's"),
    pytest.param((4, 0), 1, (), id="3. 4.0 left at TV1: neither"),
    pytest.param((4, 0), 2, (A, B), id="4. 4.0 with TV2 (its default): both"),
    pytest.param((4, 1), 2, (A, B), id="5. 4.1 with TV2: both (the lab's 4.1.1 lacks the 20090 fix)"),
    pytest.param((4, 2), 2, (A, B), id="6. 4.2.x: the last line 20310 names; 20090's fix not established"),
    pytest.param((4, 3), 2, (B,), id="7. 4.3: past 20310; 20090's fix not established"),
    pytest.param((4, 4), 2, (), id="8. 4.4+: both fixed (20090's fix is in 4.4.0's coordinator)"),
    pytest.param((4, 1), 1, (), id="9. 4.1 downgraded to TV1: neither"),
    pytest.param(None, 2, (), id="10. release unknown (no ApiVersions answer): nothing claimed"),
])
def test_the_hazard_table(release: tuple[int, int] | None, tv: int | None,
                          expected: tuple[KnownHazard, ...]) -> None:
    assert hazards(release, tv) == expected


def test_a_cluster_has_every_hazard_of_any_broker_in_the_vocabularys_order() -> None:
    rolling = (BrokerRelease(1, (4, 4), True, 2), BrokerRelease(2, (4, 3), False, 2), BrokerRelease(3, (4, 2), False, 2))
    assert cluster_hazards(rolling) == (A, B)
    assert cluster_hazards(rolling[:1]) == () and cluster_hazards(()) == ()


def test_every_hazard_is_in_the_vocabulary() -> None:
    assert set(HAZARDS) == set(KnownHazard) and all(t.name == h.value for h, t in HAZARDS.items())


def _described(tid: str, epoch: int, producer_id: int = 5) -> TransactionDescription:
    return TransactionDescription(tid, 1, TxnState.EMPTY, producer_id, epoch, 60_000, None)


def test_epoch_headroom_is_the_lowest_few_only() -> None:
    ids = [_described(f"app-{i}", i * 1000) for i in range(33)] + [_described("gone", 32_000, producer_id=-1)]
    shown = epoch_headroom(ids, limit=5)
    assert [(h.transactional_id, h.headroom) for h in shown] == [
        ("app-32", EPOCH_MAX - 32_000), ("app-31", EPOCH_MAX - 31_000), ("app-30", EPOCH_MAX - 30_000),
        ("app-29", EPOCH_MAX - 29_000), ("app-28", EPOCH_MAX - 28_000)]
    assert epoch_headroom(ids, limit=0) == ()
