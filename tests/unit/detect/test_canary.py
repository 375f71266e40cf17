"""The canary's pure rules: the id's __transaction_state partition, latency bookkeeping, blame, the finding.

Times are ms after T0; every round is a CanaryRound built here, as the probe would hand it.
"""

from __future__ import annotations

import pytest

from txnwatch.core.canary import (
    BlameKind,
    CanaryAttempt,
    CanaryRound,
    CanaryStage,
    CoordinatorLocation,
    StepError,
    java_string_hash,
    transaction_state_partition,
)
from txnwatch.core.model import ErrorClass
from txnwatch.detect import canary as rules

T0 = 1_700_000_000_000
TID = "txnwatch-canary-lab"
TOPIC = "_txnwatch_canary"
NOT_AVAILABLE = StepError(CanaryStage.COORDINATOR, "COORDINATOR_NOT_AVAILABLE", ErrorClass.REFRESH_RETRIABLE)
COMMIT_TIMEOUT = StepError(CanaryStage.COMMIT, "REQUEST_TIMED_OUT", ErrorClass.RETRIABLE)
INIT_TIMEOUT = StepError(CanaryStage.INIT, "REQUEST_TIMED_OUT", ErrorClass.RETRIABLE)
PRODUCE_FAIL = StepError(CanaryStage.PRODUCE, "NOT_LEADER_OR_FOLLOWER", ErrorClass.REFRESH_RETRIABLE)
NOT_SEEN = StepError(CanaryStage.VISIBILITY, "NOT_VISIBLE")

HEALTHY_AT_2 = CoordinatorLocation(broker_id=2, state_partition=7, state_leader=2, state_replicas=(2,))
OFFLINE = CoordinatorLocation(None, 7, None, (2,), NOT_AVAILABLE)
LOOKED_UP_NOTHING = CoordinatorLocation(None, None, None, (), NOT_AVAILABLE)


def ok(partition: int, leader: int) -> CanaryAttempt:
    return CanaryAttempt(partition, leader, None, commit_ms=12, visible_ms=40)


def failed(partition: int | None, leader: int | None, error: StepError) -> CanaryAttempt:
    return CanaryAttempt(partition, leader, error)


def round_at(seconds: float, coordinator: CoordinatorLocation, *attempts: CanaryAttempt) -> CanaryRound:
    return CanaryRound(T0 + int(seconds * 1000), TID, coordinator, attempts)


HEALTHY = (ok(0, 1), ok(1, 2), ok(2, 3))


# ---- Kafka's partitionFor ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("", 0, id="empty"),
    pytest.param("hello", 99162322, id="ascii"),  # "hello".hashCode() in Java
    pytest.param("polygenelubricants", -2147483648, id="min-value"),  # the one string hashing to Integer.MIN_VALUE
    pytest.param("\u00e9t\u00e9", 227742, id="non-ascii"),  # over UTF-16 units: 233*961 + 116*31 + 233
    pytest.param("\U0001F600", 1772899, id="surrogate-pair"),  # 0xD83D*31 + 0xDE00
])
def test_java_string_hash_is_javas(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_is_kafkas_utils_abs_not_a_sign_mask() -> None:
    """Utils.abs is Math.abs but for Integer.MIN_VALUE (0, where Math.abs stays negative); a mask of the sign bit
    (Utils.toPositive, the partitioner's) gives other partitions for negative hashes."""
    assert java_string_hash("canary") == -1367725928
    assert transaction_state_partition("canary", 10) == 1367725928 % 10 == 8
    assert transaction_state_partition("canary", 10) != (java_string_hash("canary") & 0x7FFFFFFF) % 10
    assert transaction_state_partition("polygenelubricants", 50) == 0
    assert transaction_state_partition("hello", 50) == 99162322 % 50
    assert all(0 <= transaction_state_partition(f"id-{i}", 7) < 7 for i in range(200))


# ---- latency bookkeeping -------------------------------------------------------------------------------------

def test_visibility_is_measured_from_the_commit_ack_and_each_token_once() -> None:
    book = rules.VisibilityBook()
    book.committed("a", 0, acked_ms=1_000)
    book.committed("b", 1, acked_ms=1_010)
    assert book.seen("b", 1_055) == 45
    assert book.seen("b", 1_060) is None  # seen once: a redelivery is not a second sighting
    assert book.seen("someone-else's", 1_060) is None
    assert book.seen("a", 990) == 0  # clocks never make it negative
    assert len(book) == 0


def test_commits_never_seen_expire_and_the_book_stays_bounded() -> None:
    book = rules.VisibilityBook(max_pending=3)
    for i in range(5):
        book.committed(f"t{i}", i, acked_ms=i * 100)
    assert len(book) == 3 and not book.waiting("t0") and book.waiting("t4")
    assert book.expire(now_ms=5_300, timeout_ms=5_000) == [("t2", 2), ("t3", 3)]
    assert book.waiting("t4") and len(book) == 1


# ---- blame ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("round_", "last", "kind", "broker", "state_partition", "error"), [
    pytest.param(round_at(0, OFFLINE, failed(None, None, NOT_AVAILABLE)), 2,
                 BlameKind.TRANSACTION_STATE_PARTITION, 2, 7, NOT_AVAILABLE,
                 id="1-state-partition-offline-names-the-last-coordinator"),
    pytest.param(round_at(0, OFFLINE, failed(None, None, NOT_AVAILABLE)), None,
                 BlameKind.TRANSACTION_STATE_PARTITION, 2, 7, NOT_AVAILABLE,
                 id="2-never-seen-a-coordinator-names-the-replica"),
    pytest.param(round_at(0, HEALTHY_AT_2, failed(0, 1, COMMIT_TIMEOUT), ok(1, 2)), None,
                 BlameKind.COORDINATOR, 2, 7, COMMIT_TIMEOUT, id="3-commit-not-acked-blames-the-coordinator"),
    pytest.param(round_at(0, HEALTHY_AT_2, failed(None, None, INIT_TIMEOUT)), None,
                 BlameKind.COORDINATOR, 2, 7, INIT_TIMEOUT, id="4-init-producer-id-blames-the-coordinator"),
    pytest.param(round_at(0, LOOKED_UP_NOTHING, failed(None, None, NOT_AVAILABLE)), 3,
                 BlameKind.COORDINATOR, 3, None, NOT_AVAILABLE,
                 id="5-no-metadata-but-a-coordinator-seen-before"),
    pytest.param(round_at(0, LOOKED_UP_NOTHING, failed(None, None, NOT_AVAILABLE)), None,
                 BlameKind.UNKNOWN, None, None, NOT_AVAILABLE, id="6-nothing-known"),
    pytest.param(round_at(0, HEALTHY_AT_2, ok(0, 1), failed(1, 3, PRODUCE_FAIL)), None,
                 BlameKind.PARTITION_LEADER, 3, None, PRODUCE_FAIL, id="7-record-not-taken-blames-its-leader"),
    pytest.param(round_at(0, HEALTHY_AT_2, failed(2, 1, NOT_SEEN)), None,
                 BlameKind.PARTITION_LEADER, 1, None, NOT_SEEN, id="8-never-visible-blames-the-leader"),
    pytest.param(round_at(0, HEALTHY_AT_2, failed(2, 1, PRODUCE_FAIL), failed(0, 3, COMMIT_TIMEOUT)), None,
                 BlameKind.COORDINATOR, 2, 7, COMMIT_TIMEOUT, id="9-the-coordinator-comes-first"),
])
def test_blame(round_: CanaryRound, last: int | None, kind: BlameKind, broker: int | None,
               state_partition: int | None, error: StepError) -> None:
    who, why = rules.blame(round_, TOPIC, last)
    assert (who.kind, who.broker_id, who.state_partition, why) == (kind, broker, state_partition, error)
    if broker is not None:
        assert f"broker {broker}" in who.text
    if kind is BlameKind.TRANSACTION_STATE_PARTITION:
        assert "__transaction_state-7 has no leader" in who.text


def test_a_healthy_round_blames_nobody() -> None:
    with pytest.raises(ValueError):
        rules.blame(round_at(0, HEALTHY_AT_2, *HEALTHY), TOPIC)


# ---- the finding: open after N failed rounds in a row, close on the first healthy one -------------------------

def run(rounds: list[CanaryRound], failures_to_alert: int = 2) -> list[rules.CanaryState]:
    state, states = rules.INITIAL, []
    for r in rounds:
        state = rules.advance(state, r, r.at_ms + 500, topic=TOPIC, failures_to_alert=failures_to_alert)
        states.append(state)
    return states


def test_the_finding_opens_on_the_second_failed_round_and_closes_on_a_healthy_one() -> None:
    states = run([
        round_at(0, HEALTHY_AT_2, *HEALTHY),                              # 1 healthy: the coordinator is remembered
        round_at(15, OFFLINE, failed(None, None, NOT_AVAILABLE)),         # 2 first failure: nothing yet
        round_at(30, OFFLINE, failed(None, None, NOT_AVAILABLE)),         # 3 second in a row: open
        round_at(45, OFFLINE, failed(None, None, NOT_AVAILABLE)),         # 4 still failing: refreshed, same since
        round_at(60, HEALTHY_AT_2, *HEALTHY),                             # 5 commits everywhere: closed
    ])
    assert [s.finding is not None for s in states] == [False, False, True, True, False]
    opened, refreshed = states[2].finding, states[3].finding
    assert opened is not None and refreshed is not None
    assert opened.since_ms == T0 + 15_000 and refreshed.since_ms == T0 + 15_000  # the first failure of the streak
    assert (opened.failed_rounds, refreshed.failed_rounds) == (2, 3)
    assert refreshed.last_failure_ms == T0 + 45_500
    assert opened.blame.kind is BlameKind.TRANSACTION_STATE_PARTITION and opened.blame.broker_id == 2
    assert opened.transactional_id == TID
    assert states[4] == rules.CanaryState(last_coordinator=2)


def test_one_failed_round_between_healthy_ones_opens_nothing() -> None:
    """A controlled restart of the coordinator fails one round while the new one loads __transaction_state."""
    states = run([round_at(0, HEALTHY_AT_2, *HEALTHY), round_at(15, OFFLINE, failed(None, None, NOT_AVAILABLE)),
                  round_at(30, HEALTHY_AT_2, *HEALTHY), round_at(45, OFFLINE, failed(None, None, NOT_AVAILABLE))])
    assert all(s.finding is None for s in states)
    assert states[3].failed_in_a_row == 1 and states[3].failing_since_ms == T0 + 45_000


def test_failures_to_alert_one_opens_at_once_and_lists_the_failing_partitions() -> None:
    (state,) = run([round_at(0, HEALTHY_AT_2, ok(0, 1), failed(2, 3, PRODUCE_FAIL), failed(1, 3, NOT_SEEN))], 1)
    assert state.finding is not None
    assert state.finding.failing_partitions == (1, 2)
    assert state.finding.blame.kind is BlameKind.PARTITION_LEADER and state.finding.blame.broker_id == 3


def test_a_round_with_no_attempts_is_not_healthy() -> None:
    assert not round_at(0, HEALTHY_AT_2).ok
