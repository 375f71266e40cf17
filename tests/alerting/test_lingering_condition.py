"""A lingering Flink transaction is an alert condition of its own: named by sink, subtask and checkpoint, with the
command that ends it, and folded with the timeout and LSO stalls of the same producer into one incident whose root
cause it is (alerting/grouping.py's precedence)."""

from __future__ import annotations

from dataclasses import replace

from tests.alerting.helpers import CLUSTER
from tests.unit.detect.builders import TP, partition, producer, snapshot, txn
from txnwatch.alerting.conditions import FLINK_LINGERING_TRANSACTION, LSO_STALL, TRANSACTION_TIMEOUT_EXCEEDED
from txnwatch.alerting.from_findings import ConditionBuilder
from txnwatch.alerting.grouping import ROOT_CAUSE, fold
from txnwatch.core.findings import Findings
from txnwatch.core.model import TxnState
from txnwatch.detect import INITIAL, evaluate
from txnwatch.detect.settings import DetectionSettings

NOW = 100_000_000
HOUR = 3_600_000


def _findings() -> Findings:
    settings = DetectionSettings(lso_stall_ms=0, timeout_grace_ms=0)
    stuck = partition(TP, hwm=500, lso=10, producers=(producer(pid=42, start=10, last_ms=NOW - HOUR - 60_000),))
    polled = replace(snapshot(at=NOW, partitions=(stuck,), txns=(
        txn("orders-sink-3-1204", pid=42, start=NOW - HOUR - 60_000, timeout=HOUR),
        txn("orders-sink-3-1205", pid=43, state=TxnState.COMPLETE_COMMIT, partitions=(), start=NOW - 60_000))),
        cluster=CLUSTER)
    state, _ = evaluate(INITIAL, polled, NOW - 1_000, settings)
    _, findings = evaluate(state, polled, NOW, settings)
    return findings


def test_the_condition_names_the_sink_and_hands_out_the_abort_by_id() -> None:
    findings = _findings()
    assert [f.transactional_id for f in findings.lingering] == ["orders-sink-3-1204"]
    conditions = ConditionBuilder(CLUSTER, "broker-1:9092").build(findings, None, NOW)
    (lingering,) = [c for c in conditions if c.rule == FLINK_LINGERING_TRANSACTION]
    assert "Flink sink orders-sink subtask 3 checkpoint 1,204" in lingering.summary
    assert "superseded by checkpoint 1,205 (orders-sink-3-1205, committed)" in lingering.summary
    assert lingering.details["suggested_action"].endswith(
        "txnwatch abort --bootstrap-server broker-1:9092 --transactional-id orders-sink-3-1204 --execute")
    assert lingering.group == f"{CLUSTER}/pid=42"


def test_it_is_the_root_cause_of_its_producers_timeout_and_stall() -> None:
    conditions = ConditionBuilder(CLUSTER, "broker-1:9092").build(_findings(), None, NOW)
    assert {c.rule for c in conditions} >= {FLINK_LINGERING_TRANSACTION, TRANSACTION_TIMEOUT_EXCEEDED, LSO_STALL}
    (incident,) = [c for c in fold(conditions, {}) if c.group == f"{CLUSTER}/pid=42"]
    assert incident.details[ROOT_CAUSE] == FLINK_LINGERING_TRANSACTION
    assert {r["rule"] for r in incident.details["related"]} == {TRANSACTION_TIMEOUT_EXCEEDED, LSO_STALL}
