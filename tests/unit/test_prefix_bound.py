"""queries.prefix_upper_bound: the byte range [prefix, bound) holds exactly the strings starting with prefix."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from txnwatch.store.queries import prefix_upper_bound

TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=6)
EDGY = st.text(alphabet=st.sampled_from(["a", "\x00", "\x7f", "\u07ff", "\ud7ff", "\ue000", "\uffff", "\U0010ffff"]),
               max_size=5)


@given(prefix=st.one_of(TEXT, EDGY).filter(bool), other=st.one_of(TEXT, EDGY))
def test_range_is_exactly_the_prefixed_strings(prefix: str, other: str) -> None:
    bound = prefix_upper_bound(prefix)
    for candidate in (prefix + other, other, other + prefix):
        inside = candidate.encode() >= prefix.encode() and (bound is None or candidate.encode() < bound.encode())
        assert inside == candidate.startswith(prefix), (prefix, candidate, bound)


def test_bounds() -> None:
    assert prefix_upper_bound("app-01") == "app-02"
    assert prefix_upper_bound("a\ud7ff") == "a\ue000"
    assert prefix_upper_bound("a\U0010ffff") == "b"
    assert prefix_upper_bound("\U0010ffff") is None
