"""Flink's lingering transactions: Ongoing transactions of a KafkaSink that Flink itself will never finish.

Flink's most reported transaction problem (flink-connector-kafka#296, FLINK-39218, FLINK-40626): a sink's
transaction is left Ongoing (a failed or cancelled job, a restart with another prefix or from an older checkpoint)
and pins the LSO of its partitions, so read_committed consumers see nothing past it until the coordinator aborts
it at its ``transaction.timeout.ms``, which Flink sets to an hour by default.  Two rules, both from the coordinators'
descriptions alone (no clock but ``now_ms``):

* **superseded**: a transaction of the same prefix and subtask that *started after* this one has committed (its
  coordinator shows it PrepareCommit or CompleteCommit, which keep the transaction's start time).  Flink's committer
  commits a subtask's transactions in checkpoint order, and a transaction that started later belongs to a later
  checkpoint, so this one will never be committed.  The start times decide, not the numbers in the ids: under the
  ``POOLING`` naming strategy (connector 4.x+) the number is a reused pool slot, and slot 0 reopened for checkpoint
  n+2 is legitimately Ongoing while slot 1 (checkpoint n+1) commits; it started before that commit's transaction
  did not, so it is not superseded.  The newest such commit of each sink subtask is remembered across polls, so a
  reused slot does not take the evidence with it.
* **job gone**: past its own ``transaction.timeout.ms`` plus the overdue grace (the coordinator should have aborted
  it, ``detect.hanging.find_overdue``), and no transaction of the same prefix, on any subtask, started within the
  last ``transaction.timeout.ms``: a running sink starts one every checkpoint, and Flink requires the checkpoint
  interval to be shorter than the transaction timeout, so nothing of the job is running.

Which ids are a Flink sink's is read from their names (txnwatch.core.frameworks); an id of another application
that only looks like one (``billing-3-7``) is judged superseded only if a sibling of the same prefix and subtask
started later and committed, which is what a sink does and an ordinary producer rarely shows.

The remembered commits are bounded by the sink subtasks the listing still shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from txnwatch.core.findings import LingeringTransaction
from txnwatch.core.frameworks import recognise
from txnwatch.core.model import ClusterSnapshot, TransactionDescription
from txnwatch.core.vocabulary import Framework, LingeringReason, TxnState
from txnwatch.detect.settings import DetectionSettings

#: States in which the coordinator has decided a commit (PrepareCommit: markers on their way).
_COMMITTED = frozenset({TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT})

SinkKey = tuple[str, int]  # (transactional id prefix, subtask)


class SinkCommit(NamedTuple):
    """The committed transaction of a sink subtask that started last, as far as txnwatch has seen."""

    start_time_ms: int
    transactional_id: str
    checkpoint: int


class FlinkTxn(NamedTuple):
    description: TransactionDescription
    prefix: str
    subtask: int
    checkpoint: int


def flink_transactions(snapshot: ClusterSnapshot) -> list[FlinkTxn]:
    """The described transactions whose ids Flink's KafkaSink named."""
    found = []
    for txn in snapshot.transactions.values():
        named = recognise(txn.transactional_id)
        if named is not None and named.framework is Framework.FLINK_KAFKA_SINK:
            found.append(FlinkTxn(txn, named.application, named.subtask or 0, named.checkpoint or 0))
    return found


def track_commits(previous: Mapping[SinkKey, SinkCommit], flink: list[FlinkTxn],
                  snapshot: ClusterSnapshot) -> dict[SinkKey, SinkCommit]:
    """Per sink subtask, the committed transaction that started last: this poll's and the remembered ones, for the
    sink subtasks the snapshot still describes (bounded by the listing)."""
    listed = {(f.prefix, f.subtask) for f in flink}
    commits = {key: commit for key, commit in previous.items() if key in listed}
    for f in flink:
        txn = f.description
        if txn.state not in _COMMITTED or txn.start_time_ms is None:
            continue
        key = (f.prefix, f.subtask)
        seen = commits.get(key)
        if seen is None or (txn.start_time_ms, f.checkpoint) > (seen.start_time_ms, seen.checkpoint):
            commits[key] = SinkCommit(txn.start_time_ms, txn.transactional_id, f.checkpoint)
    return commits


def find_lingering(previous: Mapping[SinkKey, SinkCommit], snapshot: ClusterSnapshot, now_ms: int,
                   settings: DetectionSettings) -> tuple[dict[SinkKey, SinkCommit], list[LingeringTransaction]]:
    """Returns (the commits to remember, the lingering transactions of this poll), most lingering first."""
    flink = flink_transactions(snapshot)
    commits = track_commits(previous, flink, snapshot)
    latest_start: dict[str, int] = {}  # per prefix, the latest start of any of its transactions
    for f in flink:
        if f.description.start_time_ms is not None:
            latest_start[f.prefix] = max(latest_start.get(f.prefix, f.description.start_time_ms),
                                         f.description.start_time_ms)
    for (prefix, _), commit in commits.items():
        latest_start[prefix] = max(latest_start.get(prefix, commit.start_time_ms), commit.start_time_ms)
    found = []
    for f in flink:
        txn = f.description
        if txn.state is not TxnState.ONGOING or txn.start_time_ms is None:
            continue
        started, age_ms = txn.start_time_ms, now_ms - txn.start_time_ms
        newer = commits.get((f.prefix, f.subtask))
        if newer is not None and newer.start_time_ms > started and newer.transactional_id != txn.transactional_id:
            reason, by, by_checkpoint = LingeringReason.SUPERSEDED, newer.transactional_id, newer.checkpoint
        elif (age_ms > txn.timeout_ms + settings.timeout_grace_ms
              and now_ms - latest_start.get(f.prefix, started) > txn.timeout_ms):
            reason, by, by_checkpoint = LingeringReason.JOB_GONE, None, None
        else:
            continue
        found.append(LingeringTransaction(
            snapshot.cluster, txn.transactional_id, txn.producer_id, txn.producer_epoch, f.prefix, f.subtask,
            f.checkpoint, reason, started, txn.timeout_ms, age_ms, txn.partitions, by, by_checkpoint))
    found.sort(key=lambda t: (-t.age_ms, t.transactional_id))
    return commits, found
