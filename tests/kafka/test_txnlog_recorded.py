"""``kafka.txnlog.decode_record`` reads every value as it did before ``decode_value`` was split into readers.

``data/txnlog_decode_recorded.json`` was recorded from the single-function ``decode_value`` (commit
7216139) on a fixed corpus of 1,500 seeded random TransactionLogValue encodings: versions 0, 1 and a newer
one, every status byte and some unknown, null and multi-topic partition lists, topic names long enough for
two-byte lengths, per-topic tagged fields, known tags of the right and the wrong size, unknown tags, and
the same bytes damaged (cut short, a byte changed, a byte appended).  Each case keeps the record's kind
and a digest of every field (error messages included: they are stored as data).
Re-recorded once since, for an intended change of meaning: tag 3 became known (NextProducerEpoch, Kafka 4.3);
the 46 cases holding a 2-byte tag 3 changed, every other digest stayed as recorded.
Re-record only for an intended change of meaning:

    PYTHONPATH=service .venv/bin/python -m tests.kafka.test_txnlog_recorded --record
"""

from __future__ import annotations

import hashlib
import json
import random
import struct
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import recorded as recorded_cases
from txnwatch.core.model import RequestError
from txnwatch.kafka.txnlog import decode_record

DATA = Path(__file__).with_name("data") / "txnlog_decode_recorded.json"
CASES = 1_500
#: TxnLogRecord's fields when the corpus was recorded.
_RECORDED_FIELDS = 20
KEY = struct.pack(">hh", 0, 3) + b"app"


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _string(raw: bytes, flexible: bool) -> bytes:
    return _uvarint(len(raw) + 1) + raw if flexible else struct.pack(">h", len(raw)) + raw


def _length(n: int, flexible: bool) -> bytes:
    return _uvarint(n + 1) if flexible else struct.pack(">i", n)


def _tags(rng: random.Random) -> bytes:
    tags = []
    for tag in sorted(rng.sample([0, 1, 2, 3, 7, 300], rng.randrange(0, 4))):
        size = {0: 8, 1: 8, 2: 2}.get(tag, rng.randrange(0, 4))
        if rng.random() < 0.1:
            size += 1  # a known tag of the wrong size is kept raw
        raw = struct.pack(">q", rng.randrange(-2, 1 << 40))[:size] if size <= 8 else bytes(size)
        if tag == 2 and size == 2:
            raw = struct.pack(">h", rng.choice([0, 1, 2]))
        tags.append(_uvarint(tag) + _uvarint(len(raw)) + raw.ljust(size, b"\0"))
    return _uvarint(len(tags)) + b"".join(tags)


def value(rng: random.Random) -> bytes:
    version = rng.choice([0, 1, 1, 1, 2])
    flexible = version >= 1
    status = rng.choice([*range(8), *range(8), 8, 9, 127])
    body = struct.pack(">hqhib", version, rng.randrange(-1, 1 << 40), rng.randrange(-1, 32_767),
                       rng.choice([1_000, 60_000, 900_000]), status)
    topics = rng.choice([-1, 0, 1, 1, 2, 3])
    body += _length(topics, flexible)
    for _ in range(max(0, topics)):
        name = "t" * rng.choice([1, 6, 126, 127, 200])
        body += _string(name.encode(), flexible)
        ids = rng.choice([0, 1, 1, 2, 5])
        body += _length(ids, flexible) + b"".join(struct.pack(">i", rng.randrange(0, 64)) for _ in range(ids))
        if flexible:
            body += _tags(rng) if rng.random() < 0.2 else b"\0"
    body += struct.pack(">qq", 1_700_000_000_000 + rng.randrange(0, 1 << 20), rng.choice([-1, 1_700_000_000_000]))
    if flexible:
        body += _tags(rng)
    return body


def _damaged(rng: random.Random, raw: bytes) -> bytes:
    how = rng.random()
    if how < 0.4:
        return raw[:rng.randrange(0, len(raw))]
    if how < 0.8:
        at = rng.randrange(0, len(raw))
        return raw[:at] + bytes([rng.randrange(256)]) + raw[at + 1:]
    return raw + bytes([rng.randrange(256)])


def corpus(case: int) -> bytes:
    rng = random.Random(f"txnlog-decode-{case}")
    raw = value(rng)
    return _damaged(rng, raw) if rng.random() < 0.3 else raw


def found(case: int) -> dict[str, Any]:
    out = decode_record(KEY, corpus(case), 3, case, 1_700_000_000_000)
    if isinstance(out, RequestError):
        return {"kind": "error", "digest": hashlib.sha256(repr(out).encode()).hexdigest()[:16]}
    fields = [f.hex() if isinstance(f, bytes) else f for f in out]
    while len(fields) > _RECORDED_FIELDS and fields[-1] is None:
        fields.pop()  # a field added since (next_producer_epoch) joins the digest only where it is set
    text = json.dumps(fields, default=lambda v: v.value if hasattr(v, "value") else repr(v))
    return {"kind": out.kind.value, "digest": hashlib.sha256(text.encode()).hexdigest()[:16]}


@pytest.mark.parametrize("part", range(5))
def test_decode_reads_what_it_read_before_the_split(part: int) -> None:
    recorded = recorded_cases.load(DATA, CASES)
    for case in range(part, CASES, 5):
        assert found(case) == recorded[case], f"case {case}: {corpus(case).hex()}"


def test_the_corpus_reaches_every_outcome() -> None:
    """Values read whole, read with a newer version's flag, with unknown fields, and refused for each reason."""
    records = [decode_record(KEY, corpus(case), 3, case, 0) for case in range(CASES)]
    problems = {r.problem.split(" ")[0] if r.problem.startswith(("unpack", "'utf-8'")) else r.problem
                for r in records if not isinstance(r, RequestError) and r.problem}
    assert {"record ends early", "trailing bytes after transaction log value", "null string", "index out of range",
            "unpack_from", "'utf-8'", "value version 2 is newer than this txnwatch knows; read with the version 1 "
            "layout"} <= problems
    assert {c["kind"] for c in recorded_cases.load(DATA, CASES)} == {"value", "undecodable"}
    assert any(r.unknown_tags for r in records if not isinstance(r, RequestError))


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    recorded_cases.record(DATA, "kafka/txnlog.decode_value before the split (7216139); tag 3 known since", found,
                          CASES)
