"""Detection's clocks round-trip through the store: what the recorder wrote is what a new term resumes from."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from txnwatch import detect
from txnwatch.core.model import (
    ClusterSnapshot,
    PartitionSnapshot,
    ProducerState,
    TopicPartition,
    TransactionDescription,
    TxnState,
)
from txnwatch.store import resume
from txnwatch.store.db import make_sessionmaker
from txnwatch.store.queries import cluster_ids
from txnwatch.store.recorder import Recorder

TP = TopicPartition("orders", 3)
T0 = 1_700_000_000_123
S = detect.DetectionSettings(lso_stall_ms=30_000)


def snapshot(at_ms: int, hwm: int, state: TxnState = TxnState.PREPARE_COMMIT, lso: int = 5) -> ClusterSnapshot:
    """app-1's open transaction starts at offset 5 and holds the LSO there until its markers are written."""
    blocker = ProducerState(producer_id=7, producer_epoch=2, last_sequence=3, last_timestamp_ms=T0,
                            coordinator_epoch=0, current_txn_start_offset=5 if lso == 5 else None)
    return ClusterSnapshot(
        cluster="c", taken_at_ms=at_ms, duration_ms=12,
        transactions={"app-1": TransactionDescription("app-1", 1, state, 7, 2, 60_000, T0 - 1_001, frozenset({TP})),
                      "app-2": TransactionDescription("app-2", 1, TxnState.ONGOING, 8, 0, 60_000, T0, frozenset())},
        partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=hwm, last_stable_offset=lso, log_start_offset=0,
                                          producers=(blocker,))},
    )


@pytest.fixture
def store(engine: Engine) -> tuple[sessionmaker[Session], Recorder]:
    """The cluster "c" registered, and the recorder that writes its polls as the daemon does."""
    sessions = make_sessionmaker(engine)
    recorder = Recorder(sessions, {"c": "h:9092"})
    recorder.start()
    return sessions, recorder


def test_open_stall_and_prepare_clock_read_back_as_detection_left_them(
        store: tuple[sessionmaker[Session], Recorder]) -> None:
    sessions, recorder = store
    state = detect.INITIAL
    for at, hwm in ((T0, 10), (T0 + 20_000, 14), (T0 + 40_000, 19)):
        state, findings = detect.evaluate(state, snapshot(at, hwm), at, S)
        recorder.on_poll("c", snapshot(at, hwm), findings, None, at)
    (live_stall,) = findings.lso_stalls
    with sessions() as session:
        cluster_id = cluster_ids(session, ["c"])["c"]
        stalls = resume.open_stalls(session, cluster_id, "c")
        since = resume.prepare_since(session, cluster_id)
    assert [(s.tp, s.started_ms, s.stalled_lso, s.max_gap, s.blocking_producer_id, s.blocking_producer_epoch)
            for s in stalls] == [(TP, T0, 5, 14, 7, 2)]
    assert since == state.prepare_since == {"app-1": ((TxnState.PREPARE_COMMIT, 7, 2, T0 - 1_001), T0)}
    resumed = detect.resumed(stalls, since, {})
    at = T0 + 60_000
    _, live = detect.evaluate(state, snapshot(at, 21), at, S)
    _, again = detect.evaluate(resumed, snapshot(at, 21), at, S)
    assert again.lso_stalls == live.lso_stalls and again.stuck_prepare == live.stuck_prepare
    assert again.lso_stalls_opened == () and live_stall.started_ms == T0


def test_nothing_to_resume_once_the_incidents_ended(store: tuple[sessionmaker[Session], Recorder]) -> None:
    sessions, recorder = store
    state = detect.INITIAL
    for at, lso, txn_state in ((T0, 5, TxnState.PREPARE_COMMIT), (T0 + 40_000, 5, TxnState.PREPARE_COMMIT),
                               (T0 + 60_000, 19, TxnState.COMPLETE_COMMIT)):  # markers written: the LSO caught up
        snap = snapshot(at, 19, txn_state, lso)
        state, findings = detect.evaluate(state, snap, at, S)
        recorder.on_poll("c", snap, findings, None, at)
    with sessions() as session:
        cluster_id = cluster_ids(session, ["c"])["c"]
        assert resume.open_stalls(session, cluster_id, "c") == []
        assert resume.prepare_since(session, cluster_id) == {}


def test_a_new_cluster_or_an_unreadable_database_starts_detection_afresh(engine: Engine, caplog) -> None:
    from txnwatch.runtime.wiring import resumed_state

    assert resumed_state(make_sessionmaker(engine), "never-polled") is detect.INITIAL

    def down() -> None:
        raise ConnectionRefusedError("database is down")

    assert resumed_state(down, "c") is detect.INITIAL  # type: ignore[arg-type]  # a stand-in whose sessions fail
    assert "could not read open incidents back" in caplog.text and "database is down" in caplog.text


def test_open_hanging_episodes_read_back_as_unlisted_transactions(
        store: tuple[sessionmaker[Session], Recorder]) -> None:
    sessions, recorder = store
    orphan = ProducerState(producer_id=9, producer_epoch=0, last_sequence=0, last_timestamp_ms=T0 - 1_000_000,
                           coordinator_epoch=-1, current_txn_start_offset=3)  # no coordinator knows producer 9
    snap = ClusterSnapshot(cluster="c", taken_at_ms=T0, duration_ms=5, max_transaction_timeout_ms=900_000,
                           partitions={TP: PartitionSnapshot(TP, leader=1, high_watermark=9, last_stable_offset=3,
                                                             log_start_offset=0, producers=(orphan,))})
    _, findings = detect.evaluate(detect.INITIAL, snap, T0, S)
    assert [h.producer_id for h in findings.hanging] == [9]
    recorder.on_poll("c", snap, findings, None, T0)
    with sessions() as session:
        assert resume.unlisted_open(session, cluster_ids(session, ["c"])["c"]) == {(TP, 9, 3): T0 - 1_000_000}
