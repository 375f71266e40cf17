"""Stored "topic-partition" text read back: the inverse of str(TopicPartition), and never an exception."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core.model import TopicPartition, split_topic_partition


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("orders-3", ("orders", 3), id="plain"),
    pytest.param("payments-eu-west-12", ("payments-eu-west", 12), id="dashes-in-the-topic"),
    pytest.param("orders", ("orders", -1), id="no-partition-kept-whole"),
    pytest.param("orders-x", ("orders-x", -1), id="non-numeric-partition-kept-whole"),
    pytest.param("-3", ("-3", -1), id="no-topic-kept-whole"),
])
def test_split(text: str, expected: tuple[str, int]) -> None:
    assert split_topic_partition(text) == expected


@given(st.text(min_size=1, max_size=40), st.integers(min_value=0, max_value=2**31 - 1))
def test_inverse_of_str(topic: str, partition: int) -> None:
    assert split_topic_partition(str(TopicPartition(topic, partition))) == (topic, partition)
