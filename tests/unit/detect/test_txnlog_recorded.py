"""``detect.txnlog.apply`` gives, record for record, what it gave before it was split into handlers.

The expected figures in ``data/txnlog_apply_recorded.json`` were recorded from the single-function
``apply`` (commit 7216139) on a fixed corpus: 400 seeded random sequences of records of three ids, every
kind (values in every state, unknown status bytes, tombstones, undecodable values), producer id and
epoch moves, both client transaction versions, unknown tagged fields, applied in seeded batches.  Each
case keeps its event counters readably and a digest of everything it found (counters, transitions,
changed ids, per-minute buckets, the final state, what check_open reports).  Re-record only for an intended change of meaning:

    PYTHONPATH=service .venv/bin/python -m tests.unit.detect.test_txnlog_recorded --record
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from tests import recorded as recorded_cases
from txnwatch.core.model import TxnLogKind, TxnLogRecord, TxnState
from txnwatch.core.vocabulary import TransitionSource
from txnwatch.detect import txnlog as d

DATA = Path(__file__).with_name("data") / "txnlog_apply_recorded.json"
CASES = 400
_STATES = [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
           TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD]
#: Kafka's moves (TransactionState.validPreviousStates, written out here so the corpus does not depend on
#: the code under test).
_NEXT = {
    TxnState.EMPTY: [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD],
    TxnState.ONGOING: [TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                       TxnState.PREPARE_EPOCH_FENCE],
    TxnState.PREPARE_COMMIT: [TxnState.COMPLETE_COMMIT],
    TxnState.PREPARE_ABORT: [TxnState.COMPLETE_ABORT],
    TxnState.PREPARE_EPOCH_FENCE: [TxnState.PREPARE_ABORT],
    TxnState.COMPLETE_COMMIT: [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD],
    TxnState.COMPLETE_ABORT: [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_ABORT, TxnState.DEAD],
}


def _record(rng: random.Random, offset: int, at: int, tid: str, last: dict[str, tuple[int, int]],
            states: dict[str, TxnState]) -> TxnLogRecord:
    roll = rng.random()
    if roll < 0.05:
        return TxnLogRecord(tid, offset % 3, offset, at, TxnLogKind.TOMBSTONE)
    if roll < 0.09:
        return TxnLogRecord(tid, offset % 3, offset, rng.choice([at, None]), TxnLogKind.UNDECODABLE,
                            problem="record ends early", raw_value=bytes(rng.randrange(256) for _ in range(5)))
    pid, epoch = last.get(tid, (7, 0))
    move = rng.random()
    if move < 0.1:
        pid += 1
        epoch = 0
    elif move < 0.45:
        epoch += rng.choice([1, 1, 1, 2, 3])
    last[tid] = (pid, epoch)
    unknown_status = rng.random() < 0.04
    # Mostly moves Kafka makes (so whole lifecycles occur: a TV2 fence takes four records), some at random.
    moves = _NEXT.get(states.get(tid, TxnState.EMPTY), [])
    state = TxnState.UNKNOWN if unknown_status else rng.choice(moves if moves and rng.random() < 0.7 else _STATES)
    states[tid] = state
    start = rng.choice([None, at - rng.randrange(0, 40_000), at])
    tags = ((9, b"\x01\x02"),) if rng.random() < 0.05 else ()
    problem = "value version 2 is newer than this txnwatch knows; read with the version 1 layout" \
        if rng.random() < 0.03 else None
    parts = (("orders", offset % 4),) if state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT,
                                                   TxnState.PREPARE_ABORT) else ()
    return TxnLogRecord(tid, offset % 3, offset, at, TxnLogKind.VALUE, state, 9 if unknown_status else None, pid,
                        epoch, rng.choice([10_000, 60_000]), parts, at, start, None, None, rng.choice([0, 1, 2, 2]),
                        1, tags, problem)


def corpus(case: int) -> tuple[list[TxnLogRecord], list[int]]:
    """The case's records, in log order, and where its batches end."""
    rng = random.Random(f"txnlog-apply-{case}")
    at = 1_700_000_000_000 + rng.randrange(0, 120_000)
    last: dict[str, tuple[int, int]] = {}
    states: dict[str, TxnState] = {}
    records: list[TxnLogRecord] = []
    for offset in range(rng.randrange(1, 31)):
        at += rng.choice([0, 1, 5, 200, 15_000, 70_000])
        records.append(_record(rng, offset, at, rng.choice("abc"), last, states))
    cuts = sorted({len(records), *(rng.randrange(0, len(records) + 1) for _ in range(rng.randrange(0, 3)))})
    return records, cuts


def _canon(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict) or hasattr(value, "items"):
        return sorted([_canon(k), _canon(v)] for k, v in value.items())
    if isinstance(value, (tuple, list, frozenset, set)):
        items = [_canon(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (frozenset, set)) else items
    return value


def found(case: int) -> dict[str, Any]:
    """What applying the case's batches one after another found: counters, and a digest of the rest."""
    records, cuts = corpus(case)
    state, parts, lo = d.TxnLogState(), [], 0
    for hi in cuts:
        state, part = d.apply(state, records[lo:hi])
        parts.append(part)
        lo = hi
    state, opened = d.check_open(state, records[-1].at_ms + 600_000)
    merged = d.merge(parts)
    # The transitions without their last field, ``source`` (always the log's here, and pinned by name above):
    # the recording predates it, so what the rules derive is compared with what they derived then.
    transitions, open_ones = [t[:-1] for t in merged.transitions], [t[:-1] for t in opened]
    assert {t.source for t in (*merged.transitions, *opened)} <= {TransitionSource.TRANSACTION_LOG}
    rest = [merged.counts, transitions, merged.changed, merged.buckets, state.ids, state.reported, open_ones]
    digest = hashlib.sha256(json.dumps(_canon(rest), sort_keys=True).encode()).hexdigest()[:20]
    events = sorted((k, v) for k, v in merged.counts.items() if v and not k.startswith("transition:"))
    return {"events": dict(events), "digest": digest}


def test_the_id_state_and_transition_carry_each_field_under_its_own_name() -> None:
    """The per-record path builds both tuples positionally for speed; every field must land by name."""
    first = TxnLogRecord("tid", 3, 41, 5, TxnLogKind.VALUE, TxnState.ONGOING, None, 11, 2, 60_000, (("t", 9),),
                         1_000, 900, None, None, 2)
    state_one, _ = d.apply(d.TxnLogState(), [first])
    rec = first._replace(state=TxnState.PREPARE_COMMIT, producer_epoch=3, offset=42, last_update_ms=1_500,
                         client_transaction_version=1)
    state, found = d.apply(state_one, [rec])
    s = state.ids["tid"]
    assert (s.state, s.producer_id, s.producer_epoch, s.timeout_ms, s.start_ms, s.last_update_ms, s.partitions,
            s.client_transaction_version, s.client_tv, s.abort, s.log_partition, s.offset) == (
        TxnState.PREPARE_COMMIT, 11, 3, 60_000, 900, 1_500, (("t", 9),), 1, 1, None, 3, 42)
    assert (s.commits, s.aborts, s.epoch_bumps, s.fences, s.timeout_aborts) == (0, 0, 1, 0, 0)
    t = found.transitions[0]
    assert t._asdict() == {
        "transactional_id": "tid", "at_ms": 1_500, "log_partition": 3, "log_offset": 42, "from_state": "Ongoing",
        "to_state": "PrepareCommit", "producer_id": 11, "producer_epoch": 3, "prev_producer_id": 11,
        "prev_producer_epoch": 2, "timeout_ms": 60_000, "start_ms": 900, "partitions": (("t", 9),),
        "events": ("epoch_bump",), "duration_ms": None, "client_transaction_version": 1, "detail": None,
        "source": TransitionSource.TRANSACTION_LOG}


@pytest.mark.parametrize("part", range(8))
def test_apply_finds_what_it_found_before_the_split(part: int) -> None:
    recorded = recorded_cases.load(DATA, CASES)
    for case in range(part, CASES, 8):
        assert found(case) == recorded[case], f"case {case}: {corpus(case)}"


def test_the_corpus_reaches_every_event_and_record_kind() -> None:
    """A corpus that never fences or never meets an unknown record would prove little."""
    seen: set[str] = set()
    for case in recorded_cases.load(DATA, CASES):
        seen.update(case["events"])
    assert {"commit", "abort", "epoch_bump", "producer_id_change", "timeout_abort", "fenced", "init_producer_id",
            "expired", "illegal_transition", "new", "unknown_record", "unknown_state", "unknown_fields",
            "records"} <= seen


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    recorded_cases.record(DATA, "detect/txnlog.apply before the split (7216139)", found, CASES)
