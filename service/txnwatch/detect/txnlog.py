"""Exact coordinator history: the transaction log's records, applied in order.

``apply(state, records, settings) -> (state, findings)`` is pure: the same records
from the same state always give the same events, so a restart that resumes from the
stored state and log positions derives exactly what an uninterrupted run would.

What each record means, and the rule of each state it reaches, is
:mod:`txnwatch.detect.txnlog_rules`; this module keeps the batch: the per-id states,
the counters and per-minute aggregates, the merge of batches, and the clock-driven checks.

Stuck Prepare* and transactions running past their timeout are durations, not
records: :func:`check_open` reports them against a clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from txnwatch.core.findings import Transition
from txnwatch.core.model import TxnLogKind, TxnLogRecord
from txnwatch.core.vocabulary import (
    ABORT,
    COMMIT,
    EPOCH_BUMP,
    EXPIRED,
    FENCED,
    ILLEGAL_TRANSITION,
    INIT_PRODUCER_ID,
    LONG_TRANSACTION,
    OPEN_STATES,
    PREPARE_STATES,
    PRODUCER_ID_CHANGE,
    STUCK_PREPARE,
    TIMEOUT_ABORT,
    UNKNOWN_FIELDS,
    UNKNOWN_RECORD,
    UNKNOWN_STATE,
    TransitionSource,
    TxnState,
)
from txnwatch.detect.settings import DetectionSettings
from txnwatch.detect.txnlog_rules import IdState, after_other, after_value

# Names the store, the tail and the tests take from here (the record rules live in txnlog_rules; the event words
# in core.vocabulary).
__all__ = ["ANOMALIES", "BUCKET_MS", "COUNTED", "IdState", "TxnLogFindings", "TxnLogState", "apply", "check_open",
           "merge", "open_transactions"]

_OPEN, _PREPARE = frozenset(OPEN_STATES), frozenset(PREPARE_STATES)
_VALUE = TxnLogKind.VALUE
_TOMBSTONE = TxnLogKind.TOMBSTONE

#: Events worth a row in the hot database (the rest of the stream goes to the archive only).
ANOMALIES = frozenset({TIMEOUT_ABORT, FENCED, PRODUCER_ID_CHANGE, EXPIRED, ILLEGAL_TRANSITION, UNKNOWN_RECORD,
                       UNKNOWN_STATE, UNKNOWN_FIELDS, STUCK_PREPARE, LONG_TRANSACTION})
#: Cumulative counters the tail keeps per cluster (plus "records" and "transition:<from>:<to>").
COUNTED = (COMMIT, ABORT, EPOCH_BUMP, PRODUCER_ID_CHANGE, TIMEOUT_ABORT, FENCED, INIT_PRODUCER_ID, EXPIRED,
           ILLEGAL_TRANSITION, UNKNOWN_RECORD, UNKNOWN_STATE, UNKNOWN_FIELDS)
BUCKET_MS = 60_000
#: "transition:<from>:<to>" counter keys, built once (the hot path names one per record).
_TRANSITION_KEY = {a: {b: f"transition:{a.value if a is not None else 'None'}:{b.value}" for b in TxnState}
                   for a in (None, *TxnState)}


@dataclass(frozen=True, slots=True)
class TxnLogState:
    """Every id's latest state, and which open transactions were already reported as stuck/long."""

    ids: Mapping[str, IdState] = field(default_factory=dict)
    reported: frozenset[tuple[str, int, int, str]] = frozenset()


@dataclass(frozen=True, slots=True)
class TxnLogFindings:
    transitions: tuple[Transition, ...] = ()
    #: Increments of the cumulative counters (COUNTED keys, "records", "transition:<from>:<to>").
    counts: Mapping[str, int] = field(default_factory=dict)
    #: Ids whose state changed, with their new state (None: expired and removed).
    changed: Mapping[str, IdState | None] = field(default_factory=dict)
    #: Per-minute aggregates: bucket start ms -> counter increments ("duration_ms_sum"/"_count"/"_max" too).
    buckets: Mapping[int, Mapping[str, int]] = field(default_factory=dict)

    @property
    def anomalies(self) -> tuple[Transition, ...]:
        return tuple(t for t in self.transitions if not ANOMALIES.isdisjoint(t.events))


def apply(state: TxnLogState, records: Iterable[TxnLogRecord]) -> tuple[TxnLogState, TxnLogFindings]:
    """Apply records in log order (per coordinator partition); ``state`` is not modified."""
    ids = dict(state.ids)
    changed: dict[str, IdState | None] = {}
    counts: dict[str, int] = {}
    buckets: dict[int, dict[str, int]] = {}
    transitions: list[Transition] = []
    n = 0
    for rec in records:
        n += 1
        tid = rec.transactional_id
        prev = ids.get(tid)
        if rec.kind is _VALUE:
            new, transition, bump = after_value(prev, rec)
            ids[tid] = changed[tid] = new
            key = _TRANSITION_KEY[prev.state if prev else None][new.state]
            counts[key] = counts.get(key, 0) + 1
        else:
            transition, bump = after_other(prev, rec), 0
            if rec.kind is _TOMBSTONE:
                ids.pop(tid, None)
                changed[tid] = None
        transitions.append(transition)
        if transition.events:
            _count(counts, buckets, transition.at_ms, transition.events, transition.duration_ms, bump)
    counts["records"] = counts.get("records", 0) + n
    return (TxnLogState(ids, state.reported),
            TxnLogFindings(tuple(transitions), counts, changed, buckets))


def merge(batches: Sequence[TxnLogFindings]) -> TxnLogFindings:
    """What applying the batches' records one after another found, as if applied in one batch.

    The tail applies every fetch at once but stores at most about once a second: counts and
    per-minute aggregates add up (the maximum duration takes the larger), transitions keep log
    order, and an id changed in several keeps only its latest state, so one id touched a
    thousand times between two commits costs one row write.
    """
    if len(batches) == 1:
        return batches[0]
    counts: dict[str, int] = {}
    changed: dict[str, IdState | None] = {}
    buckets: dict[int, dict[str, int]] = {}
    transitions: list[Transition] = []
    for found in batches:
        transitions.extend(found.transitions)
        changed.update(found.changed)
        for key, value in found.counts.items():
            counts[key] = counts.get(key, 0) + value
        for start, values in found.buckets.items():
            bucket = buckets.setdefault(start, {})
            for key, value in values.items():
                if key == "duration_ms_max":
                    bucket[key] = max(bucket.get(key, 0), value)
                else:
                    bucket[key] = bucket.get(key, 0) + value
    return TxnLogFindings(tuple(transitions), counts, changed, buckets)


def _count(counts: dict[str, int], buckets: dict[int, dict[str, int]], at_ms: int, events: tuple[str, ...],
           duration_ms: int | None, bump: int) -> None:
    if not events:
        return
    bucket = buckets.get(at_ms - at_ms % BUCKET_MS)
    if bucket is None:
        bucket = buckets[at_ms - at_ms % BUCKET_MS] = {}
    for event in events:
        step = bump if event == EPOCH_BUMP else 1
        counts[event] = counts.get(event, 0) + step
        bucket[event] = bucket.get(event, 0) + step
    if duration_ms is not None:
        bucket["duration_ms_sum"] = bucket.get("duration_ms_sum", 0) + duration_ms
        bucket["duration_count"] = bucket.get("duration_count", 0) + 1
        bucket["duration_ms_max"] = max(bucket.get("duration_ms_max", 0), duration_ms)


def check_open(state: TxnLogState, now_ms: int,
               settings: DetectionSettings = DetectionSettings()) -> tuple[TxnLogState, tuple[Transition, ...]]:
    """Open transactions the log says are stuck in Prepare* or running past their timeout.

    Each is reported once per transaction (id, producer id, epoch, kind); ``reported`` forgets
    transactions that have moved on, so the state stays as small as the set of open ones.
    """
    found: list[Transition] = []
    still: set[tuple[str, int, int, str]] = set()
    for tid, s in state.ids.items():
        if s.state not in _OPEN:
            continue
        if s.state in _PREPARE:
            kind, since, limit = STUCK_PREPARE, s.last_update_ms, settings.prepare_stuck_ms
        elif s.start_ms is not None:
            kind, since, limit = LONG_TRANSACTION, s.start_ms, s.timeout_ms + settings.timeout_grace_ms
        else:
            continue
        if now_ms - since <= limit:
            continue
        key = (tid, s.producer_id, s.producer_epoch, kind)
        still.add(key)
        if key in state.reported:
            continue
        found.append(Transition(
            transactional_id=tid, at_ms=now_ms, log_partition=s.log_partition, log_offset=s.offset,
            from_state=s.state.value, to_state=s.state.value, producer_id=s.producer_id,
            producer_epoch=s.producer_epoch, prev_producer_id=s.producer_id, prev_producer_epoch=s.producer_epoch,
            timeout_ms=s.timeout_ms, start_ms=s.start_ms, partitions=s.partitions, events=(kind,),
            duration_ms=now_ms - since, client_transaction_version=s.client_transaction_version,
            detail=f"{s.state.value} for {(now_ms - since) // 1000}s", source=TransitionSource.TRANSACTION_LOG))
    if not found and still == state.reported:
        return state, ()
    return TxnLogState(state.ids, frozenset(still)), tuple(found)


def open_transactions(state: TxnLogState) -> dict[str, IdState]:
    """Ids with an open transaction right now, per the log."""
    return {tid: s for tid, s in state.ids.items() if s.state in _OPEN}
