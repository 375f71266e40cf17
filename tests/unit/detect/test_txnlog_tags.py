"""The known tags (PreviousProducerId, NextProducerId, Kafka 4.3+) against the sequence of records (Kafka <= 4.2).

Each sequence is what Kafka writes, once without tags (<= 4.2, KAFKA-20310) and once with them the way 4.3+ fills
them (``TransactionMetadata.prepareTransitionTo``: PreviousProducerId is the producer id before the transition, on
every record; NextProducerId is on the Prepare* of a transaction version 2 transaction whose epoch is exhausted).
Where the id's previous record was read, both must give the same history; where it was not, only the tags can
link the old producer id to the new one.
"""

from __future__ import annotations

import pytest

from tests.unit.detect.test_txnlog import CA, CC, KAFKA_411_TV1_CLIENT, ON, PA, PC, E, rec, seq, tv2_commits
from txnwatch.core.findings import Transition
from txnwatch.core.model import TxnLogRecord
from txnwatch.detect import txnlog as d


def tagged(records: list[TxnLogRecord], next_ids: dict[int, int] | None = None) -> list[TxnLogRecord]:
    """The records as Kafka 4.3+ writes them: PreviousProducerId = the id's producer id before the record (its own
    on the id's first record); NextProducerId on the records at the offsets ``next_ids`` names."""
    last: dict[str, int] = {}
    out = []
    for r in records:
        out.append(r._replace(previous_producer_id=last.get(r.transactional_id, r.producer_id),
                              next_producer_id=(next_ids or {}).get(r.offset)))
        last[r.transactional_id] = r.producer_id
    return out


def history(records: list[TxnLogRecord]) -> tuple[d.TxnLogState, list[Transition], dict[str, int]]:
    """The ids' states, each transition without its free-text detail, and the counters."""
    state, found = d.apply(d.TxnLogState(), records)
    return state, [t._replace(detail=None) for t in found.transitions], dict(found.counts)


#: TV1-style rotation (KIP-360): InitProducerId on an id whose epoch is exhausted writes Empty under a new
#: producer id at epoch 0 (``prepareProducerIdRotation``).
INIT_ROTATION = seq(rec(E, 32_765, 1_000), rec(E, 32_766, 1_100), rec(E, 0, 1_200, pid=8),
                    rec(ON, 0, 1_300, 1_300, pid=8), rec(PC, 0, 1_310, 1_300, pid=8), rec(CC, 0, 1_320, 1_300, pid=8))
#: Transaction version 2 overflow: the commit that bumps to 32,767 completes under the next producer id at epoch 0
#: (``prepareAbortOrCommit`` picks it and writes it as NextProducerId; ``prepareComplete`` moves to it).
TV2_ROTATION = seq(rec(E, 32_764, 900, tv=2), rec(ON, 32_764, 1_000, 1_000, tv=2),
                   rec(PC, 32_765, 1_005, 1_000, tv=2), rec(CC, 32_765, 1_009, 1_000, tv=2),
                   rec(ON, 32_765, 1_500, 1_500, tv=2), rec(PC, 32_766, 1_505, 1_500, tv=2),
                   rec(CC, 0, 1_509, 1_500, tv=2, pid=8), rec(ON, 0, 2_000, 2_000, tv=2, pid=8))
TV2_ROTATION_NEXT = {5: 8}
TV2_FENCE = seq(rec(E, 0, 900, tv=2), *tv2_commits(3), rec(ON, 3, 3_000, 3_000, tv=2),
                rec(PA, 4, 3_050, 3_000, tv=2), rec(CA, 4, 3_060, 3_000, tv=2), rec(E, 5, 3_150, tv=2))


@pytest.mark.parametrize(("records", "next_ids"), [
    pytest.param(KAFKA_411_TV1_CLIENT, None, id="tv1-client-commit-abort-fence-timeout"),
    pytest.param(seq(rec(E, 0, 900, tv=2), *tv2_commits(50)), None, id="tv2-commits"),
    pytest.param(TV2_FENCE, None, id="tv2-fence"),
    pytest.param(INIT_ROTATION, None, id="init-producer-id-rotation"),
    pytest.param(TV2_ROTATION, TV2_ROTATION_NEXT, id="tv2-rotation-at-complete"),
])
def test_tagged_and_untagged_records_give_the_same_history(records: list[TxnLogRecord],
                                                           next_ids: dict[int, int] | None) -> None:
    untagged = history(records)
    with_tags = history(tagged(records, next_ids))
    assert with_tags[0] == untagged[0]
    assert with_tags[1] == untagged[1]
    assert with_tags[2] == untagged[2]


@pytest.mark.parametrize("records", [
    pytest.param(INIT_ROTATION, id="init-producer-id-rotation"),
    pytest.param(TV2_ROTATION, id="tv2-rotation-at-complete"),
])
def test_a_rotation_is_one_producer_id_change_from_7_to_8(records: list[TxnLogRecord]) -> None:
    for form in (records, tagged(records, TV2_ROTATION_NEXT)):
        _, transitions, counts = history(form)
        moved = [t for t in transitions if "producer_id_change" in t.events]
        assert counts["producer_id_change"] == 1
        assert [(t.prev_producer_id, t.producer_id, t.producer_epoch) for t in moved] == [(7, 8, 0)]


def test_next_producer_id_names_the_rotation_at_prepare_before_the_complete_record() -> None:
    _, found = d.apply(d.TxnLogState(), tagged(TV2_ROTATION, TV2_ROTATION_NEXT)[:6])
    prepare = found.transitions[5]
    assert (prepare.to_state, prepare.producer_id) == ("PrepareCommit", 7)
    assert prepare.detail is not None and prepare.detail.startswith("next producer id 8:")
    _, untagged = d.apply(d.TxnLogState(), TV2_ROTATION[:6])
    assert untagged.transitions[5].detail is None


def test_next_producer_epoch_is_named_beside_the_next_producer_id() -> None:
    record = rec(PC, 5, 1_000, 900, tv=2)._replace(previous_producer_id=7, next_producer_id=8, next_producer_epoch=0)
    _, found = d.apply(d.TxnLogState(), [record])
    assert found.transitions[0].detail is not None
    assert found.transitions[0].detail.startswith("next producer id 8 epoch 0:")


def test_only_the_tag_links_an_id_first_read_after_its_rotation() -> None:
    """The id's records before the rotation were never read (compacted away, or the tail began after them)."""
    first = rec(E, 0, 1_200, pid=8)
    _, untagged = d.apply(d.TxnLogState(), [first])
    assert untagged.transitions[0].events == ("new",)
    assert untagged.transitions[0].prev_producer_id is None
    _, found = d.apply(d.TxnLogState(), [first._replace(previous_producer_id=7)])
    assert found.transitions[0].events == ("new", "producer_id_change")
    assert (found.transitions[0].prev_producer_id, found.transitions[0].prev_producer_epoch) == (7, None)
    assert found.counts["producer_id_change"] == 1


def test_a_new_ids_own_producer_id_in_the_tag_is_no_change() -> None:
    _, found = d.apply(d.TxnLogState(), [rec(E, 0, 1_000)._replace(previous_producer_id=7)])
    assert found.transitions[0].events == ("new",)
    assert found.transitions[0].prev_producer_id is None


def test_the_tag_wins_over_the_last_record_read_when_records_were_missed() -> None:
    """Read: pid 7 at epoch 5.  Missed: the move to 8.  Read next: pid 9 whose tag says it came from 8."""
    state, _ = d.apply(d.TxnLogState(), [rec(E, 5, 1_000)])
    _, untagged = d.apply(state, [rec(E, 0, 2_000, pid=9, offset=3)])
    assert (untagged.transitions[0].prev_producer_id, untagged.transitions[0].prev_producer_epoch) == (7, 5)
    _, found = d.apply(state, [rec(E, 0, 2_000, pid=9, offset=3)._replace(previous_producer_id=8)])
    t = found.transitions[0]
    assert "producer_id_change" in t.events
    assert (t.prev_producer_id, t.prev_producer_epoch) == (8, None)


def test_no_bump_is_guessed_across_a_move_the_tag_says_happened_earlier() -> None:
    """Read: pid 7 at epoch 5.  Missed: the move to 8 and its first records.  Read next: pid 8 at epoch 9, whose tag
    says the record itself did not move the id.  The sequence alone would call it a new producer id."""
    state, _ = d.apply(d.TxnLogState(), [rec(CC, 5, 1_000, 900)])
    _, untagged = d.apply(state, [rec(ON, 9, 2_000, 2_000, pid=8, offset=3)])
    assert "producer_id_change" in untagged.transitions[0].events
    _, found = d.apply(state, [rec(ON, 9, 2_000, 2_000, pid=8, offset=3)._replace(previous_producer_id=8)])
    t = found.transitions[0]
    assert "producer_id_change" not in t.events and "epoch_bump" not in t.events
    assert found.counts.get("epoch_bump", 0) == 0
    assert (t.prev_producer_id, t.prev_producer_epoch) == (8, None)
