"""Flink's lingering transactions, as a numbered table: the coordinators' descriptions of one poll -> what lingers.

Times are ms relative to the injected clock ``NOW``.  A sink ``job`` (prefix) writes with subtasks 0 and 1; its
ids are ``job-<subtask>-<checkpoint>`` (INCREMENTING) or ``job-<subtask>-<slot>`` (POOLING).  Each row says why.
The rule under test (txnwatch.detect.lingering): superseded when a transaction of the same prefix and subtask that
*started later* committed; job gone when past timeout + grace and nothing of the prefix started within a timeout.
"""

from __future__ import annotations

import pytest

from tests.unit.detect.builders import TP, TP1, snapshot, txn
from txnwatch.core.model import TransactionDescription, TxnState
from txnwatch.core.vocabulary import LingeringReason
from txnwatch.detect import INITIAL, evaluate
from txnwatch.detect.lingering import SinkCommit, find_lingering
from txnwatch.detect.settings import DetectionSettings

NOW = 10_000_000
HOUR = 3_600_000
SETTINGS = DetectionSettings(timeout_grace_ms=30_000)
ONGOING, COMMIT, PREPARE_COMMIT, ABORT = (TxnState.ONGOING, TxnState.COMPLETE_COMMIT, TxnState.PREPARE_COMMIT,
                                          TxnState.COMPLETE_ABORT)
SUPERSEDED, GONE = LingeringReason.SUPERSEDED, LingeringReason.JOB_GONE


def t(txn_id: str, state: TxnState, started_ago_ms: int | None, timeout: int = HOUR, pid: int = 1) -> TransactionDescription:
    return txn(txn_id, pid=pid, state=state, partitions=(TP, TP1) if state is ONGOING else (),
               start=None if started_ago_ms is None else NOW - started_ago_ms, timeout=timeout)


Row = tuple[tuple[TransactionDescription, ...], list[tuple[str, LingeringReason, str | None]]]

TABLE: list[object] = [
    pytest.param((t("job-0-7", ONGOING, 60_000), t("job-0-8", COMMIT, 30_000)),
                 [("job-0-7", SUPERSEDED, "job-0-8")],
                 id="1. INCREMENTING: checkpoint 8 of subtask 0 started later and committed: 7 will never be"),
    pytest.param((t("job-0-7", ONGOING, 60_000), t("job-0-8", PREPARE_COMMIT, 30_000)),
                 [("job-0-7", SUPERSEDED, "job-0-8")],
                 id="2. PrepareCommit is a decided commit too (markers on their way)"),
    pytest.param((t("job-0-7", ONGOING, 60_000), t("job-0-8", ONGOING, 30_000)), [],
                 id="3. concurrent checkpoints: 8 open while 7 awaits its commit is normal"),
    pytest.param((t("job-0-7", ONGOING, 60_000), t("job-1-8", COMMIT, 30_000)), [],
                 id="4. another subtask's commit says nothing about subtask 0's transaction"),
    pytest.param((t("job-0-7", ONGOING, 60_000), t("other-0-8", COMMIT, 30_000)), [],
                 id="5. another prefix (another sink) says nothing either"),
    pytest.param((t("job-0-7", ONGOING, 60_000), t("job-0-8", ABORT, 30_000)), [],
                 id="6. a newer abort is no commit: Flink did not move past 7 by it"),
    pytest.param((t("job-0-0", ONGOING, 20_000), t("job-0-1", COMMIT, 50_000)), [],
                 id="7. POOLING: slot 0 reopened for checkpoint n+2 after slot 1 (n+1) began; 1's commit is older"),
    pytest.param((t("job-0-1", ONGOING, 60_000), t("job-0-0", COMMIT, 30_000)),
                 [("job-0-1", SUPERSEDED, "job-0-0")],
                 id="8. POOLING: a lower slot that started later committed: the higher slot is left behind"),
    pytest.param((t("job-0-12", ONGOING, 20_000), t("job-0-30", COMMIT, 50_000)), [],
                 id="9. restored from an older checkpoint: 30 of the old run started before the new run's 12"),
    pytest.param((t("job-0-7", ONGOING, HOUR + 31_000), t("job-1-7", ONGOING, HOUR + 40_000)),
                 [("job-1-7", GONE, None), ("job-0-7", GONE, None)],
                 id="10. job gone: both subtasks past timeout + grace, nothing of the prefix started within an hour"),
    pytest.param((t("job-0-7", ONGOING, HOUR + 29_000),), [],
                 id="11. past its timeout but within the grace: the coordinator may still abort it"),
    pytest.param((t("job-0-7", ONGOING, HOUR + 31_000), t("job-1-9", ONGOING, 5_000)), [],
                 id="12. past timeout but the job lives (subtask 1 opened a transaction since): overdue, not gone"),
    pytest.param((t("job-0-7", ONGOING, HOUR + 31_000), t("job-1-9", COMMIT, 5_000)), [],
                 id="13. past timeout, and a commit of the prefix started since: the job lives"),
    pytest.param((t("job-0-7", ONGOING, HOUR + 31_000), t("job-1-9", COMMIT, HOUR + 1_000)),
                 [("job-0-7", GONE, None)],
                 id="13b. the prefix's last transaction started more than a timeout ago: gone all the same"),
    pytest.param((t("job-0-7", ONGOING, HOUR + 31_000), t("job-0-9", COMMIT, 5_000)),
                 [("job-0-7", SUPERSEDED, "job-0-9")],
                 id="14. both rules hold: superseded names the proof, so it wins"),
    pytest.param((t("orders-7", ONGOING, HOUR * 3), t("billing-service-v2", ONGOING, HOUR * 3)), [],
                 id="15. ids no framework named are not Flink's: overdue's business, not this rule's"),
    pytest.param((t(f"app-{'3f2a9c1e-7b4d-4e8a-9f10-2c6d8e0b1a57'}-1", ONGOING, HOUR * 3),), [],
                 id="16. a Kafka Streams id past its timeout is not a Flink sink's"),
    pytest.param((t("job-0-7", ONGOING, None), t("job-0-8", COMMIT, 30_000)), [],
                 id="17. no start time (described without one): nothing to order by, nothing claimed"),
    pytest.param((t("job-0-7", ONGOING, 60_000), t("job-0-8", COMMIT, None)), [],
                 id="18. a commit without a start time proves nothing"),
    pytest.param((t("job-0-7", COMMIT, 60_000), t("job-0-8", COMMIT, 30_000)), [],
                 id="19. all committed: nothing open, nothing lingers"),
]


@pytest.mark.parametrize(("txns", "expected"), TABLE)
def test_the_lingering_table(txns: tuple[TransactionDescription, ...],
                             expected: list[tuple[str, LingeringReason, str | None]]) -> None:
    _, found = find_lingering({}, snapshot(txns=txns, at=NOW), NOW, SETTINGS)
    assert [(f.transactional_id, f.reason, f.superseded_by) for f in found] == expected


def test_a_finding_says_the_sink_subtask_checkpoint_and_partitions() -> None:
    _, (found,) = find_lingering({}, snapshot(txns=(t("orders-sink-3-1204", ONGOING, 90_000, pid=42),
                                                     t("orders-sink-3-1205", COMMIT, 60_000)), at=NOW), NOW, SETTINGS)
    assert (found.prefix, found.subtask, found.checkpoint, found.superseded_checkpoint) == ("orders-sink", 3, 1204, 1205)
    assert (found.producer_id, found.age_ms, found.start_time_ms, found.partitions) == (42, 90_000, NOW - 90_000,
                                                                                          frozenset({TP, TP1}))


def test_a_commit_is_remembered_when_its_pool_slot_is_reused() -> None:
    """POOLING reuses slot 0: the poll that saw it committed is the only proof; the next poll sees it reopened."""
    first = snapshot(txns=(t("job-0-1", ONGOING, 60_000), t("job-0-0", COMMIT, 30_000)), at=NOW)
    commits, found = find_lingering({}, first, NOW, SETTINGS)
    assert commits == {("job", 0): SinkCommit(NOW - 30_000, "job-0-0", 0)} and len(found) == 1
    reopened = snapshot(txns=(t("job-0-1", ONGOING, 60_000), t("job-0-0", ONGOING, 10_000)), at=NOW)
    commits, found = find_lingering(commits, reopened, NOW, SETTINGS)
    assert [(f.transactional_id, f.reason) for f in found] == [("job-0-1", SUPERSEDED)]
    assert find_lingering({}, reopened, NOW, SETTINGS)[1] == []  # without the memory: no proof, no finding
    elsewhere = snapshot(txns=(t("other-0-0", ONGOING, 1),), at=NOW)
    assert find_lingering(commits, elsewhere, NOW, SETTINGS)[0] == {}, \
        "a sink subtask no longer described is forgotten: the memory is bounded by the listing"


def test_evaluate_carries_the_findings_and_the_memory() -> None:
    state, findings = evaluate(INITIAL, snapshot(txns=(t("job-0-7", ONGOING, 60_000), t("job-0-8", COMMIT, 30_000)),
                                                 at=NOW), NOW, SETTINGS)
    assert [f.transactional_id for f in findings.lingering] == ["job-0-7"]
    assert state.sink_commits == {("job", 0): SinkCommit(NOW - 30_000, "job-0-8", 8)}
