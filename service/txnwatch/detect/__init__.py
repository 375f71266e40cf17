"""Detection: pure functions of (previous state, snapshot, clock) → (next state, findings).

No I/O and no clock of its own: the collector passes ``now_ms``, tests pass any
instant they like.  Everything a poll needs to remember for the next one lives in
the immutable :class:`DetectorState`, so a replica that becomes leader starts from
:func:`resumed` (the incidents the store holds open) or :data:`INITIAL`, and a replayed
snapshot sequence always yields the same findings.

One module per question:

* :mod:`~txnwatch.detect.hanging` — Kafka's find-hanging, overdue and stuck Prepare*;
* :mod:`~txnwatch.detect.lso` — LSO stall episodes;
* :mod:`~txnwatch.detect.verification` — KIP-890-style verification time and failures;
* :mod:`~txnwatch.detect.transitions` — coordinator history and derived events;
* :mod:`~txnwatch.detect.lag` — read_committed consumer lag;
* :mod:`~txnwatch.detect.lingering` — Flink sink transactions Flink will never finish;

Whatever the poll could not learn (a failed listing, a silent coordinator or
partition leader) is *undetermined*: it neither raises nor clears an incident.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from txnwatch.core.findings import Findings, LsoStall
from txnwatch.core.model import ClusterSnapshot, TopicPartition, TransactionDescription
from txnwatch.core.vocabulary import TxnEvent
from txnwatch.detect import cardinality, hanging, lag, lag_reuse, lingering, lso, transitions, verification
from txnwatch.detect.settings import DetectionSettings

__all__ = [
    "INITIAL",
    "DetectionSettings",
    "DetectorState",
    "TxnEvent",
    "evaluate",
    "event_counts",
    "resumed",
]


@dataclass(frozen=True, slots=True)
class DetectorState:
    """What one poll hands the next; replaced, never mutated (each poll builds fresh mappings)."""

    transactions: Mapping[str, TransactionDescription] = field(default_factory=dict)
    prepare_since: Mapping[str, tuple[hanging.PrepareKey, int]] = field(default_factory=dict)
    lso: Mapping[TopicPartition, lso.LsoTrack] = field(default_factory=dict)
    verification: Mapping[verification.OpenKey, verification.Pending] = field(default_factory=dict)
    lso_history: Mapping[TopicPartition, lag.LsoHistory] = field(default_factory=dict)
    commits: Mapping[lag.CommitKey, lag.CommitSeen] = field(default_factory=dict)
    #: Last poll's group rows, kept for the groups nothing changed for (detect/lag_reuse.py).
    lag_memo: lag_reuse.LagMemo = lag_reuse.EMPTY
    #: Per Flink sink subtask, its committed transaction that started last (detect/lingering.py).
    sink_commits: Mapping[lingering.SinkKey, lingering.SinkCommit] = field(default_factory=dict)
    resumed: bool = False  # the next poll is the first of a leadership term that carried incidents over


INITIAL = DetectorState()


def resumed(open_stalls: Iterable[LsoStall], prepare_since: Mapping[str, tuple[hanging.PrepareKey, int]],
            unlisted: Mapping[verification.OpenKey, int]) -> DetectorState:
    """The state a leadership term starts from when the store remembers incidents still open.

    LSO stalls and stuck Prepare* states are the findings that need a clock kept across
    polls; rebuilt from their open episodes and from when each Prepare* began, a restart or
    a takeover continues them instead of ending and reopening them.  ``unlisted`` (the open
    hanging episodes' transactions) carry verification failures over; other open
    transactions are judged in the first poll by their producers' last writes (see
    :class:`~txnwatch.detect.verification.Pending`).  The rest is learnt again within a
    poll or two.
    """
    return DetectorState(prepare_since=dict(prepare_since), lso=lso.resume(open_stalls),
                         verification=verification.resume(unlisted), resumed=True)


def evaluate(previous: DetectorState, snapshot: ClusterSnapshot, now_ms: int,
             settings: DetectionSettings = DetectionSettings()) -> tuple[DetectorState, Findings]:
    """One poll's detection: pure, so replaying the same snapshots yields the same findings."""
    hanging_found, undetermined = hanging.find_hanging(snapshot, now_ms, settings,
                                                       verification.open_producers(previous.verification))
    prepare_since = hanging.track_prepare(previous.prepare_since, snapshot, now_ms)
    lso_tracks, stalls, ended = lso.update_lso(previous.lso, snapshot, now_ms, settings)
    pending, checked = verification.check(previous.verification, snapshot, now_ms, settings, previous.resumed)
    remembered, changes = transitions.diff(previous.transactions, snapshot, now_ms)
    history = lag.update_history(previous.lso_history, snapshot, now_ms, settings.lso_history)
    commits = lag_reuse.track_commits(previous.lag_memo, previous.commits, snapshot, now_ms)
    all_lags, all_exporter_lags, lag_memo = lag_reuse.group_lags(previous.lag_memo, snapshot, history, now_ms, commits)
    lags, exporter_lags, omitted = cardinality.cap_groups(all_lags, all_exporter_lags, settings.max_groups,
                                                          settings.max_group_partitions)
    omitted[cardinality.GROUPS_FILTERED] = snapshot.groups_filtered
    sink_commits, lingering_found = lingering.find_lingering(previous.sink_commits, snapshot, now_ms, settings)
    state = DetectorState(remembered, prepare_since, lso_tracks, pending, history, commits, lag_memo, sink_commits)
    findings = Findings(
        cluster=snapshot.cluster,
        now_ms=now_ms,
        hanging=tuple(hanging_found),
        undetermined=tuple(undetermined),
        overdue=tuple(hanging.find_overdue(snapshot, now_ms, settings)),
        stuck_prepare=tuple(hanging.find_stuck_prepare(prepare_since, snapshot, now_ms, settings)),
        lso_stalls=tuple(stalls),
        lso_stalls_opened=tuple(s for s in stalls if (t := previous.lso.get(s.tp)) is None or t.episode is None),
        lso_stalls_ended=tuple(ended),
        verification=checked,
        transitions=tuple(changes),
        lags=lags,
        exporter_lags=exporter_lags,
        omitted=omitted,
        lingering=tuple(lingering_found),
    )
    return state, findings


def event_counts(findings: Findings | None) -> dict[str, int]:
    """Increments of the coordinator-history counters (commits, aborts, fencings, transitions) one poll contributes."""
    if findings is None:
        return {}
    counts: dict[str, int] = {}
    for transition in findings.transitions:
        for event in transition.events:
            step = 1
            if event == TxnEvent.EPOCH_BUMP and transition.prev_producer_epoch is not None:
                # What the wire says between two polls: under transaction version 2 every ended transaction
                # bumps the epoch once, so the rise counts the transactions polling did not see end.  Summed
                # as the transaction log's counter is, so both modes mean the same.
                step = max(1, transition.producer_epoch - transition.prev_producer_epoch)
            counts[event] = counts.get(event, 0) + step
        key = f"transition:{transition.from_state or 'None'}:{transition.to_state}"
        counts[key] = counts.get(key, 0) + 1
    return counts
