"""The transactional canary's rules, pure: latency bookkeeping, whom a failed round blames, the finding.

* :class:`VisibilityBook` matches the read_committed reader's sightings to the commits they confirm: a record
  is *visible* once the partition's LSO has passed it (its commit marker written), which is what a
  read_committed consumer waits for.  Bounded: a commit never seen is dropped after its timeout.
* :func:`blame` names the part of the cluster a failed round points at.  A step that needs the coordinator
  (FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn) blames it; when the id's ``__transaction_state``
  partition has no leader, nobody can coordinate the id, so the partition and the broker that held it (the
  last coordinator seen, else its replica) are named.  A record not taken or never made visible blames the
  canary partition's leader.
* :func:`advance` opens the finding "transactions cannot commit" after ``failures_to_alert`` failed rounds in a
  row and closes it on the first round that commits everywhere.  One failed round is not enough by default:
  a coordinator failover (a controlled broker restart) makes one round fail while the new coordinator loads
  ``__transaction_state``, and heals by itself.

No clock of its own: the caller passes ``now_ms``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

from txnwatch.core.canary import (
    Blame,
    BlameKind,
    CanaryAttempt,
    CanaryFailure,
    CanaryRound,
    CoordinatorLocation,
    StepError,
)
from txnwatch.core.model import TRANSACTION_STATE_TOPIC

#: Commits awaiting their sighting at most (a round holds one per partition; more means the reader fell behind).
MAX_PENDING = 1024


class VisibilityBook:
    """Commits acknowledged and not yet seen by the read_committed reader: token → (partition, ack time)."""

    def __init__(self, max_pending: int = MAX_PENDING) -> None:
        self._pending: OrderedDict[str, tuple[int, int]] = OrderedDict()
        self._max = max_pending

    def committed(self, token: str, partition: int, acked_ms: int) -> None:
        self._pending[token] = (partition, acked_ms)
        while len(self._pending) > self._max:
            self._pending.popitem(last=False)

    def seen(self, token: str, seen_ms: int) -> int | None:
        """The visibility latency of ``token`` (ms, never negative), or None for a record this book does not wait
        for (an earlier process's, or one already given up on)."""
        entry = self._pending.pop(token, None)
        if entry is None:
            return None
        return max(0, seen_ms - entry[1])

    def waiting(self, token: str) -> bool:
        return token in self._pending

    def expire(self, now_ms: int, timeout_ms: int) -> list[tuple[str, int]]:
        """Commits not seen within ``timeout_ms`` of their acknowledgement, removed: (token, partition)."""
        late = [(token, partition) for token, (partition, acked) in self._pending.items() if now_ms - acked >= timeout_ms]
        for token, _ in late:
            del self._pending[token]
        return late

    def __len__(self) -> int:
        return len(self._pending)


def _coordinator_blame(location: CoordinatorLocation, last_coordinator: int | None) -> Blame:
    partition = location.state_partition
    where = f"{TRANSACTION_STATE_TOPIC}-{partition}" if partition is not None else TRANSACTION_STATE_TOPIC
    if partition is not None and location.state_leader is None and location.state_replicas:  # read, and offline
        held_by = last_coordinator if last_coordinator is not None else (
            location.state_replicas[0] if location.state_replicas else None)
        replicas = ", ".join(str(r) for r in location.state_replicas) or "none known"
        text = (f"{where} has no leader (replicas: {replicas}), so no broker can coordinate the id"
                + (f"; broker {held_by} coordinated it" if held_by is not None else ""))
        return Blame(BlameKind.TRANSACTION_STATE_PARTITION, held_by, partition, text)
    broker = location.broker_id if location.broker_id is not None else last_coordinator
    if broker is None:
        return Blame(BlameKind.UNKNOWN, None, partition, "no coordinator could be found for the id")
    return Blame(BlameKind.COORDINATOR, broker, partition,
                 f"broker {broker}, the id's transaction coordinator (leader of {where})")


def _leader_blame(attempt: CanaryAttempt, topic: str) -> Blame:
    where = f"{topic}-{attempt.partition}"
    if attempt.leader_id is None:
        return Blame(BlameKind.PARTITION_LEADER, None, None, f"{where} has no leader")
    return Blame(BlameKind.PARTITION_LEADER, attempt.leader_id, None, f"broker {attempt.leader_id}, leader of {where}")


def blame(round_: CanaryRound, topic: str, last_coordinator: int | None = None) -> tuple[Blame, StepError]:
    """Whom a failed round blames, and the error that says so.  Coordinator-side failures come first: with no
    coordinator, no partition could have committed anyway."""
    failures = round_.failures
    if not failures:
        raise ValueError("a round without failures blames nobody")
    location = round_.coordinator
    coordinator_side = [a for a in failures if a.error is not None and a.error.stage.needs_coordinator]
    if location.error is not None:
        return _coordinator_blame(location, last_coordinator), location.error
    if coordinator_side:
        first = coordinator_side[0]
        assert first.error is not None
        return _coordinator_blame(location, last_coordinator), first.error
    first = failures[0]
    assert first.error is not None
    return _leader_blame(first, topic), first.error


@dataclass(frozen=True, slots=True)
class CanaryState:
    """What the rules remember between rounds."""

    failed_in_a_row: int = 0
    failing_since_ms: int | None = None
    #: The coordinator of the id in the latest round that found one (blamed when the next cannot find any).
    last_coordinator: int | None = None
    finding: CanaryFailure | None = None


INITIAL = CanaryState()


def advance(state: CanaryState, round_: CanaryRound, now_ms: int, *, topic: str,
            failures_to_alert: int) -> CanaryState:
    """The state after one round: the finding opens on the ``failures_to_alert``-th failed round in a row, is
    refreshed (blame, error, partitions) while rounds keep failing, and closes on the first round that commits
    everywhere.  ``now_ms`` is the round's end."""
    coordinator = round_.coordinator.broker_id if round_.coordinator.broker_id is not None else state.last_coordinator
    if round_.ok:
        return CanaryState(last_coordinator=coordinator)
    failed = state.failed_in_a_row + 1
    since = state.failing_since_ms if state.failing_since_ms is not None else round_.at_ms
    finding = state.finding
    if failed >= failures_to_alert:
        who, error = blame(round_, topic, state.last_coordinator)
        partitions = tuple(sorted({a.partition for a in round_.failures if a.partition is not None}))
        finding = CanaryFailure(transactional_id=round_.transactional_id, since_ms=since, last_failure_ms=now_ms,
                                failed_rounds=failed, blame=who, error=error, failing_partitions=partitions)
    return replace(state, failed_in_a_row=failed, failing_since_ms=since, last_coordinator=coordinator,
                   finding=finding)
