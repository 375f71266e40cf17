"""ClusterSnapshot.transactional_ids_for_producer: the per-snapshot index answers as a scan of ``listed`` does."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core.model import ClusterSnapshot, ListedTransaction, TxnState

_listed = st.lists(st.builds(ListedTransaction, st.text(min_size=1, max_size=5), st.integers(0, 5),
                             st.just(TxnState.ONGOING), st.integers(0, 2)), max_size=30)


@given(_listed, st.integers(-1, 6))
def test_index_equals_a_scan_in_listing_order(listed: list[ListedTransaction], producer_id: int) -> None:
    snap = ClusterSnapshot(cluster="c", taken_at_ms=0, duration_ms=0, listed=tuple(listed))
    scan = tuple(t.transactional_id for t in listed if t.producer_id == producer_id)
    assert snap.transactional_ids_for_producer(producer_id) == scan
    assert snap.transactional_ids_for_producer(producer_id) == scan  # second call: from the index
    # a copy with another listing must not reuse the first snapshot's index
    other = dataclasses.replace(snap, listed=tuple(reversed(listed)))
    assert other.transactional_ids_for_producer(producer_id) == tuple(reversed(scan))
    assert snap == dataclasses.replace(snap)  # the cache takes no part in equality


@given(st.one_of(st.none(), st.text(max_size=20), st.sampled_from([s.value for s in TxnState]),
                 st.sampled_from([s.value.upper() for s in TxnState])))
def test_state_parse_is_a_case_insensitive_lookup_with_unknown_fallback(raw: str | None) -> None:
    scan = next((s for s in TxnState if raw and s.value.lower() == raw.lower()), TxnState.UNKNOWN)
    assert TxnState.parse(raw) is scan
