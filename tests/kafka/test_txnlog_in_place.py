"""``decode_in`` (the key and value read where they lie in a fetched batch) answers exactly as ``decode_record``.

``decode_record`` is the reference: ``decode_in`` reads what Kafka 4 writes in one pass and hands
everything else to it.  Each case puts the key and value inside other bytes, as a batch holds them,
so that a read past the value's end would be seen.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.kafka.test_txnlog import EMPTY, KEY, ONGOING_ONE_PARTITION, PREPARE_COMMIT_TWO
from txnwatch.core.model import TxnLogKind, TxnLogRecord, TxnState
from txnwatch.kafka.txnlog import decode_in, decode_record

AROUND = b"\x05\x00\x02"  # bytes before and after, as the batch's other fields
VALUES = [EMPTY, ONGOING_ONE_PARTITION, PREPARE_COMMIT_TWO]


def both(key: bytes | None, value: bytes | None, timestamp: int | None = 1_000) -> object:
    data = AROUND + (key or b"") + AROUND + (value or b"") + AROUND
    key_at = len(AROUND)
    value_at = key_at + len(key or b"") + len(AROUND)
    in_place = decode_in(data, key_at, -1 if key is None else len(key), value_at,
                         -1 if value is None else len(value), 6, 42, timestamp)
    reference = decode_record(key, value, 6, 42, timestamp)
    assert in_place == reference
    assert type(in_place) is type(reference)
    return in_place


def _tagged(*tags: bytes) -> bytes:
    return EMPTY[:-1] + bytes([len(tags)]) + b"".join(tags)


def _topics(*topics: tuple[bytes, list[int]]) -> bytes:
    """ONGOING_ONE_PARTITION's value with these topics instead of its one."""
    body = bytes([len(topics) + 1])
    for name, ids in topics:
        body += bytes([len(name) + 1]) + name + bytes([len(ids) + 1]) + b"".join(struct.pack(">i", i) for i in ids)
        body += b"\x00"
    return ONGOING_ONE_PARTITION[:17] + body + ONGOING_ONE_PARTITION[-17:]


@pytest.mark.parametrize(("key", "value"), [
    *(pytest.param(KEY, v, id=f"captured-{i}") for i, v in enumerate(VALUES)),
    pytest.param(KEY, None, id="tombstone"),
    pytest.param(None, EMPTY, id="no-key"),
    pytest.param(KEY, _topics((b"orders", [3]), (b"payments", [0, 1, 2])), id="two-topics"),
    pytest.param(KEY, _topics((b"orders", [])), id="topic-without-partitions"),
    pytest.param(KEY, _tagged(bytes([0, 8]) + struct.pack(">q", 11), bytes([1, 8]) + struct.pack(">q", 12),
                              bytes([2, 2]) + struct.pack(">h", 2), bytes([3, 2]) + struct.pack(">h", 7)),
                 id="every-known-tag"),
    pytest.param(KEY, _tagged(bytes([0, 8]) + struct.pack(">q", -1)), id="kafkas-not-set-written-out"),
    pytest.param(KEY, _tagged(b"\x07\x03abc"), id="unknown-tag-kept-raw"),
    pytest.param(KEY, _tagged(bytes([2, 4]) + b"\x00\x00\x00\x02"), id="known-tag-of-another-size"),
    pytest.param(KEY, b"\x00\x00" + EMPTY[2:-1], id="version-0"),
    pytest.param(KEY, b"\x00\x02" + EMPTY[2:], id="newer-version"),
    pytest.param(KEY, EMPTY[:16] + b"\x09" + EMPTY[17:], id="unknown-status"),
    pytest.param(KEY, EMPTY + b"\x00", id="trailing-byte"),
    pytest.param(KEY, EMPTY[:-1], id="cut-short"),
    pytest.param(KEY, _topics((b"\xff\xfe", [1])), id="topic-not-utf8"),
    pytest.param(b"\x00\x01" + KEY[2:], EMPTY, id="key-version-1"),
    pytest.param(KEY[:-1], EMPTY, id="key-cut-short"),
    pytest.param(b"\x00\x00\x00\x02\xc3\x28", EMPTY, id="key-not-utf8"),
])
def test_same_answer_as_decode_record(key: bytes | None, value: bytes | None) -> None:
    both(key, value)


def test_the_usual_record_is_read_in_place() -> None:
    """The fast path itself, not only the fallback, gives the fields (named, read back)."""
    decoded = both(KEY, PREPARE_COMMIT_TWO, timestamp=-1)
    assert isinstance(decoded, TxnLogRecord) and decoded.kind is TxnLogKind.VALUE
    assert decoded.state is TxnState.PREPARE_COMMIT and decoded.partitions == (("xe2caf", 0), ("xe2caf", 1))
    assert decoded.timestamp_ms is None and decoded.transactional_id == "tl-xe2caf"


@given(value=st.sampled_from(VALUES), at=st.integers(0, 60), byte=st.integers(0, 255),
       cut=st.integers(0, 3), timestamp=st.one_of(st.none(), st.integers(-2, 2**40)))
def test_damaged_values_same_answer(value: bytes, at: int, byte: int, cut: int, timestamp: int | None) -> None:
    at %= len(value)
    damaged = value[:at] + bytes([byte]) + value[at + 1:]
    both(KEY, damaged[:len(damaged) - cut], timestamp)


@given(key=st.one_of(st.none(), st.binary(max_size=30)), value=st.one_of(st.none(), st.binary(max_size=90)))
def test_any_bytes_same_answer(key: bytes | None, value: bytes | None) -> None:
    both(key, value)
