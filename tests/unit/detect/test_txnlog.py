"""Exact history from transaction log records: each rule on the sequences Kafka really writes."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnwatch.core.model import TxnLogKind, TxnLogRecord, TxnState
from txnwatch.detect import txnlog as d
from txnwatch.detect.settings import DetectionSettings

E, ON, PC, PA = TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT
CC, CA = TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT
P = (("t", 0),)


def rec(state: TxnState, epoch: int, at: int, start: int | None = None, tv: int = 0, pid: int = 7,
        tid: str = "a", offset: int = 0, timeout: int = 10_000) -> TxnLogRecord:
    parts = P if state in (ON, PC, PA) else ()
    return TxnLogRecord(tid, 0, offset, at, TxnLogKind.VALUE, state, None, pid, epoch, timeout, parts, at, start,
                        None, None, tv)


def seq(*records: TxnLogRecord) -> list[TxnLogRecord]:
    return [r._replace(offset=i) for i, r in enumerate(records)]


def events(records: list[TxnLogRecord]) -> tuple[Counter[str], d.TxnLogFindings]:
    _, findings = d.apply(d.TxnLogState(), records)
    return Counter({k: v for k, v in findings.counts.items() if not k.startswith("transition:")}), findings


# Captured on Kafka 4.1.1 (transaction.version 2 finalized) with kafka-python, a TV1 client: commit, own abort,
# then a second instance's InitProducerId fencing an open transaction, then a coordinator timeout abort.
KAFKA_411_TV1_CLIENT = seq(
    rec(E, 0, 325), rec(ON, 0, 354, 354), rec(PC, 0, 376, 354), rec(CC, 0, 378, 354),
    rec(ON, 0, 404, 404), rec(PA, 0, 414, 404), rec(CA, 0, 414, 404),
    rec(ON, 0, 550, 550), rec(PA, 1, 781, 550, tv=2), rec(CA, 1, 812, 550, tv=2), rec(E, 2, 914, tv=2),
    rec(ON, 2, 920, 920), rec(PA, 3, 10_657 + 1_000, 920, tv=2), rec(CA, 3, 11_658, 920, tv=2))


def test_kafka_411_tv1_client_sequence() -> None:
    counts, findings = events(KAFKA_411_TV1_CLIENT)
    assert counts["commit"] == 1 and counts["abort"] == 3
    assert counts["fenced"] == 1 and counts["timeout_abort"] == 1
    assert counts["epoch_bump"] == 3 and counts["illegal_transition"] == 0
    assert counts["records"] == len(KAFKA_411_TV1_CLIENT)
    fence = next(t for t in findings.transitions if "fenced" in t.events)
    assert (fence.log_offset, fence.to_state) == (8, "PrepareAbort")
    assert {t.log_offset for t in findings.anomalies} == {8, 12}
    durations = [t.duration_ms for t in findings.transitions if t.duration_ms is not None]
    assert durations[0] == 378 - 354


def tv2_commits(n: int, epoch: int = 0, at: int = 1_000) -> list[TxnLogRecord]:
    out = []
    for i in range(n):
        t = at + i * 500
        out += [rec(ON, epoch + i, t, t, tv=2), rec(PC, epoch + i + 1, t + 5, t, tv=2),
                rec(CC, epoch + i + 1, t + 9, t, tv=2)]
    return out


def test_tv2_every_commit_bumps_once_and_is_neither_fence_nor_timeout() -> None:
    counts, _ = events(seq(rec(E, 0, 900, tv=2), *tv2_commits(420)))
    assert counts["commit"] == 420 and counts["epoch_bump"] == 420
    assert counts["fenced"] == counts["timeout_abort"] == counts["illegal_transition"] == 0


def test_tv2_fence_is_the_abort_followed_by_the_new_instances_init_producer_id() -> None:
    records = seq(rec(E, 0, 900, tv=2), *tv2_commits(3), rec(ON, 3, 3_000, 3_000, tv=2),
                  rec(PA, 4, 3_050, 3_000, tv=2), rec(CA, 4, 3_060, 3_000, tv=2), rec(E, 5, 3_150, tv=2))
    counts, findings = events(records)
    assert counts["fenced"] == 1 and counts["abort"] == 1 and counts["commit"] == 3
    assert next(t for t in findings.transitions if "fenced" in t.events).to_state == "Empty"


def test_tv2_clients_own_abort_is_no_fence() -> None:
    records = seq(rec(E, 0, 900, tv=2), *tv2_commits(2), rec(ON, 2, 3_000, 3_000, tv=2),
                  rec(PA, 3, 3_050, 3_000, tv=2), rec(CA, 3, 3_060, 3_000, tv=2), rec(ON, 3, 3_100, 3_100, tv=2))
    counts, _ = events(records)
    assert counts["abort"] == 1 and counts["fenced"] == 0 and counts["init_producer_id"] == 0


def test_tv2_timeout_abort() -> None:
    records = seq(rec(E, 0, 900, tv=2), *tv2_commits(1), rec(ON, 1, 3_000, 3_000, tv=2),
                  rec(PA, 2, 13_001, 3_000, tv=2), rec(CA, 2, 13_010, 3_000, tv=2))
    counts, _ = events(records)
    assert counts["timeout_abort"] == 1 and counts["fenced"] == 0 and counts["abort"] == 1


@pytest.mark.parametrize(("states", "illegal"), [
    pytest.param([ON, PC, PA], 1, id="committing-then-aborting"),
    pytest.param([ON, PC, CC, CC], 1, id="complete-twice"),
    pytest.param([E, PC], 1, id="commit-without-ongoing"),
    pytest.param([E, PA, CA], 0, id="tv2-abort-from-empty-is-legal"),
    pytest.param([ON, ON, PC, CC, ON], 0, id="normal"),
])
def test_illegal_transitions_follow_kafkas_valid_previous_states(states: list[TxnState], illegal: int) -> None:
    counts, _ = events(seq(*(rec(s, 0, 1_000 + i, 1_000) for i, s in enumerate(states))))
    assert counts["illegal_transition"] == illegal


def test_producer_id_change_expiry_and_unknown_records() -> None:
    records = seq(rec(E, 32_766, 1_000), rec(E, 0, 1_100, pid=8),
                  TxnLogRecord("a", 0, 0, 2_000, TxnLogKind.TOMBSTONE),
                  TxnLogRecord("b", 0, 0, 2_100, TxnLogKind.UNDECODABLE, problem="bad", raw_value=b"\x01"),
                  rec(TxnState.UNKNOWN, 0, 2_200, tid="c")._replace(raw_status=9))
    state, findings = d.apply(d.TxnLogState(), records)
    assert findings.counts["producer_id_change"] == 1 and findings.counts["expired"] == 1
    assert findings.counts["unknown_record"] == 1 and findings.counts["unknown_state"] == 1
    assert "a" not in state.ids and findings.changed["a"] is None and "b" not in state.ids
    unknown = next(t for t in findings.transitions if "unknown_record" in t.events)
    assert unknown.detail is not None and "01" in unknown.detail
    assert any(t.to_state == "Unknown(9)" for t in findings.transitions)


def test_apply_in_batches_equals_apply_at_once() -> None:
    records = seq(*KAFKA_411_TV1_CLIENT, *tv2_commits(5, epoch=4, at=20_000))
    _, whole = d.apply(d.TxnLogState(), records)
    state, total = d.TxnLogState(), Counter[str]()
    for i in range(0, len(records), 4):
        state, part = d.apply(state, records[i:i + 4])
        total.update(part.counts)
    assert total == Counter(whole.counts)


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([E, ON, PC, PA, CC, CA, TxnState.PREPARE_EPOCH_FENCE]),
                          st.integers(0, 3), st.integers(0, 90_000), st.booleans()), max_size=40),
       st.lists(st.integers(0, 40), max_size=6))
def test_merged_batches_equal_one_batch(steps: list[tuple[str, TxnState, int, int, bool]], cuts: list[int]) -> None:
    """What the tail commits once a second (several fetches merged) is what applying them at once finds."""
    records, at = [], 1_000
    for i, (tid, s, epoch, gap, expire) in enumerate(steps):
        at += gap
        records.append(TxnLogRecord(tid, 0, i, at, TxnLogKind.TOMBSTONE) if expire
                       else rec(s, epoch, at, at - gap // 2, tv=2, tid=tid, offset=i))
    _, whole = d.apply(d.TxnLogState(), records)
    state, parts, bounds = d.TxnLogState(), [], sorted({0, len(records), *(c for c in cuts if c < len(records))})
    for lo, hi in pairwise(bounds):
        state, part = d.apply(state, records[lo:hi])
        parts.append(part)
    merged = d.merge(parts) if parts else d.TxnLogFindings()
    assert merged.transitions == whole.transitions
    assert {k: v for k, v in merged.counts.items() if v} == {k: v for k, v in whole.counts.items() if v}
    assert dict(merged.changed) == dict(whole.changed)  # one row per id: its latest state, or None when expired
    assert {b: dict(v) for b, v in merged.buckets.items()} == {b: dict(v) for b, v in whole.buckets.items()}


def test_check_open_reports_stuck_prepare_and_long_transactions_once() -> None:
    state, _ = d.apply(d.TxnLogState(), seq(rec(ON, 0, 1_000, 1_000, tid="long"), rec(ON, 0, 1_000, 1_000, tid="p"),
                                             rec(PC, 0, 2_000, 1_000, tid="p")))
    settings = DetectionSettings(prepare_stuck_ms=30_000, timeout_grace_ms=5_000)
    state, found = d.check_open(state, 12_000, settings)
    assert found == ()
    state, found = d.check_open(state, 40_000, settings)
    assert sorted((t.transactional_id, t.events[0]) for t in found) == [("long", "long_transaction"),
                                                                       ("p", "stuck_prepare")]
    state, again = d.check_open(state, 50_000, settings)
    assert again == ()


STATES = st.sampled_from([E, ON, PC, PA, CC, CA, TxnState.PREPARE_EPOCH_FENCE, TxnState.UNKNOWN])


@given(st.lists(st.tuples(st.sampled_from("ab"), STATES, st.integers(0, 5), st.integers(0, 3), st.integers(0, 2)),
                max_size=40))
def test_any_sequence_applies_without_error_and_counts_every_record(steps: list[tuple[str, TxnState, int, int, int]]
                                                                   ) -> None:
    records = [rec(s, epoch, 1_000 + i * 10, 1_000, tv=tv, pid=pid, tid=tid, offset=i)
               for i, (tid, s, epoch, pid, tv) in enumerate(steps)]
    state, findings = d.apply(d.TxnLogState(), records)
    assert findings.counts.get("records", 0) == len(records) == len(findings.transitions)
    assert set(state.ids) == {r.transactional_id for r in records}
    # Every event counter agrees with the transition rows that carry the event (an epoch bump counts by how much
    # the epoch rose): the counters are what /metrics adds up and the rows what the API lists, so one must never
    # count what the other lacks.
    for event in {e for t in findings.transitions for e in t.events} | {"epoch_bump", "commit", "abort", "fenced"}:
        rows = [t for t in findings.transitions if event in t.events]
        expected = sum(t.producer_epoch - (t.prev_producer_epoch or 0) for t in rows) if event == "epoch_bump" \
            else len(rows)
        assert findings.counts.get(event, 0) == expected, event


def test_polling_counts_the_epoch_rise_between_two_polls() -> None:
    """Fallback mode: under TV2 the epoch rose by one per transaction that ended between the polls."""
    from txnwatch.core.findings import Findings
    from txnwatch.core.model import ClusterSnapshot, TransactionDescription
    from txnwatch.detect import event_counts
    from txnwatch.detect import transitions as poll_transitions

    def snap(epoch: int, start: int) -> ClusterSnapshot:
        return ClusterSnapshot("c", start, 1, transactions={
            "a": TransactionDescription("a", 1, ON, 7, epoch, 10_000, start)})

    remembered, _ = poll_transitions.diff({}, snap(3, 1_000), 1_000)
    _, changes = poll_transitions.diff(remembered, snap(10, 5_000), 5_000)
    counts = event_counts(Findings("c", 5_000, transitions=tuple(changes)))
    assert counts["epoch_bump"] == 7 and counts["completed_between_polls"] == 1


def test_the_record_fields_after_value_unpacks_are_in_their_order() -> None:
    """detect/txnlog_rules.after_value unpacks a TxnLogRecord by position (once per record of the log, issue 25): a
    field added, removed or moved must be seen here and there together."""
    from txnwatch.core.model import TxnLogRecord

    assert TxnLogRecord._fields == (
        "transactional_id", "log_partition", "offset", "timestamp_ms", "kind", "state", "raw_status", "producer_id",
        "producer_epoch", "timeout_ms", "partitions", "last_update_ms", "start_ms", "previous_producer_id",
        "next_producer_id", "client_transaction_version", "value_version", "unknown_tags", "problem", "raw_value",
        "next_producer_epoch")
