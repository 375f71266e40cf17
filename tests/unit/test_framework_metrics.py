"""/metrics by framework: per-application series capped (the most open first, the rest counted), lingering Flink
transactions counted per reason with an age series each for the oldest; all from the registry the daemon builds."""

from __future__ import annotations

from dataclasses import replace

from prometheus_client import CollectorRegistry

from tests.unit.detect.builders import TP, snapshot, txn
from txnwatch.core.model import ListedTransaction, TxnState
from txnwatch.core.views import LatestState
from txnwatch.detect import INITIAL, evaluate
from txnwatch.metrics.frameworks import APPLICATIONS_SHOWN
from txnwatch.metrics.registry import build_registry

UUID = "3f2a9c1e-7b4d-4e8a-9f10-2c6d8e0b1a57"
NOW = 10_000_000


def _listed(txn_id: str, state: TxnState = TxnState.EMPTY) -> ListedTransaction:
    return ListedTransaction(txn_id, 1, state, 1)


def _registry(state: LatestState) -> CollectorRegistry:
    return build_registry(state, lambda: True)


def test_applications_are_capped_most_open_first_and_the_rest_counted() -> None:
    listed = [_listed(f"app{i:03d}-{UUID}-1") for i in range(APPLICATIONS_SHOWN + 10)]  # idle Streams apps
    listed += [_listed(f"busy-{UUID}-{n}", TxnState.ONGOING) for n in (1, 2, 3)]  # 3 threads, all open
    listed += [_listed("orders-sink-0-7", TxnState.ONGOING), _listed("orders-sink-1-7", TxnState.COMPLETE_COMMIT)]
    listed += [_listed("plain-producer"), _listed("invoice-7")]  # nobody's
    state = LatestState()
    state.update("prod", snapshot=replace(snapshot(at=NOW), cluster="prod", listed=tuple(listed)))
    r = _registry(state)

    def ids(framework: str, application: str) -> float | None:
        return r.get_sample_value("txnwatch_framework_transactional_ids",
                                  {"cluster": "prod", "framework": framework, "application": application})

    assert ids("kafka_streams_eos_v2", "busy") == 3
    assert r.get_sample_value("txnwatch_framework_open_transactions", {
        "cluster": "prod", "framework": "kafka_streams_eos_v2", "application": "busy"}) == 3
    assert ids("flink_kafka_sink", "orders-sink") == 2
    assert r.get_sample_value("txnwatch_framework_open_transactions", {
        "cluster": "prod", "framework": "flink_kafka_sink", "application": "orders-sink"}) == 1
    shown = [s for m in r.collect() if m.name == "txnwatch_framework_transactional_ids" for s in m.samples]
    assert len(shown) == APPLICATIONS_SHOWN, "the application label is bounded by the cap"
    # 62 applications (60 idle, busy, orders-sink): the two with open transactions first, then 48 idle by name.
    assert r.get_sample_value("txnwatch_framework_applications_omitted", {"cluster": "prod"}) == 12
    assert ids("kafka_streams_eos_v2", "app047") == 1 and ids("kafka_streams_eos_v2", "app048") is None


def test_lingering_counts_per_reason_and_ages() -> None:
    polled = snapshot(at=NOW, txns=(
        txn("orders-sink-3-1204", pid=42, partitions=(TP,), start=NOW - 90_000, timeout=3_600_000),
        txn("orders-sink-3-1205", pid=43, state=TxnState.COMPLETE_COMMIT, partitions=(), start=NOW - 60_000)))
    polled = replace(polled, cluster="prod")
    _, findings = evaluate(INITIAL, polled, NOW)
    state = LatestState()
    state.update("prod", snapshot=polled, findings=findings)
    r = _registry(state)
    assert r.get_sample_value("txnwatch_flink_lingering_transactions", {"cluster": "prod", "reason": "superseded"}) == 1
    assert r.get_sample_value("txnwatch_flink_lingering_transactions", {"cluster": "prod", "reason": "job_gone"}) == 0
    assert r.get_sample_value("txnwatch_flink_lingering_transaction_age_seconds", {
        "cluster": "prod", "transactional_id": "orders-sink-3-1204", "application": "orders-sink", "subtask": "3",
        "checkpoint": "1204", "reason": "superseded"}) == 90.0
