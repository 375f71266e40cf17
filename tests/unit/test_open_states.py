"""One meaning of "open": a transaction being fenced (PrepareEpochFence) pins its partitions like any other.

Every /metrics family about open transactions must count the same transactions the API and the
oldest-open gauge count; the age gauges used to keep their own list without PrepareEpochFence.
"""

from __future__ import annotations

from prometheus_client.registry import CollectorRegistry

from tests.unit.detect.builders import snapshot as build_snapshot
from tests.unit.detect.builders import txn
from txnwatch import detect
from txnwatch.core.views import ClusterView, LatestState
from txnwatch.core.vocabulary import OPEN_STATES, TxnState
from txnwatch.metrics.findings import FindingsCollector, describe_findings
from txnwatch.metrics.snapshot import SnapshotCollector

NOW_S = 10_000.0
NOW_MS = int(NOW_S * 1000)


def _registry() -> CollectorRegistry:
    # Started 400 s, 120 s and 20 s ago: a transaction being fenced, an ongoing one, a finished one.
    snap = build_snapshot(at=NOW_MS, txns=(
        txn("fencing", pid=1, state=TxnState.PREPARE_EPOCH_FENCE, start=NOW_MS - 400_000),
        txn("ongoing", pid=2, state=TxnState.ONGOING, start=NOW_MS - 120_000),
        txn("finished", pid=3, state=TxnState.COMPLETE_COMMIT, start=NOW_MS - 20_000),
    ))
    _, findings = detect.evaluate(detect.INITIAL, snap, NOW_MS)
    state = LatestState(["c"])
    state.publish(ClusterView(name="c", up=True, snapshot=snap, findings=findings))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(state, clock=lambda: NOW_S))
    registry.register(FindingsCollector(state, lambda views: describe_findings(views, now_s=NOW_S)))
    return registry


def test_open_states_are_kafkas_ongoing_and_prepare_states_fence_included() -> None:
    assert OPEN_STATES == (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                           TxnState.PREPARE_EPOCH_FENCE)
    assert [s for s in TxnState if s.is_open] == list(OPEN_STATES)


def test_a_fencing_transaction_counts_as_open_in_every_age_gauge() -> None:
    r = _registry()
    assert r.get_sample_value("txnwatch_transaction_oldest_open_age_seconds", {"cluster": "c"}) == 400
    assert r.get_sample_value("txnwatch_open_transactions_older_than",
                              {"cluster": "c", "older_than_seconds": "300"}) == 1
    assert r.get_sample_value("txnwatch_open_transactions_older_than",
                              {"cluster": "c", "older_than_seconds": "60"}) == 2
    assert r.get_sample_value("txnwatch_open_transactions_older_than",
                              {"cluster": "c", "older_than_seconds": "10"}) == 2  # the finished one is not open
    assert r.get_sample_value("txnwatch_transaction_oldest_age_seconds",
                              {"cluster": "c", "state": "PrepareEpochFence"}) == 400
    assert r.get_sample_value("txnwatch_transaction_age_seconds",
                              {"cluster": "c", "transactional_id": "fencing", "state": "PrepareEpochFence"}) == 400
    assert r.get_sample_value("txnwatch_transaction_timeout_seconds",
                              {"cluster": "c", "transactional_id": "fencing"}) == 60
    assert r.get_sample_value("txnwatch_transaction_age_seconds",
                              {"cluster": "c", "transactional_id": "finished", "state": "CompleteCommit"}) is None
