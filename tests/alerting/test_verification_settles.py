"""The verification warning settles (issue 27 item 5): one identity while the same transactions fail.

In the demo it stayed pending for the whole run, its text flipping between "1 of 3", "1 of 2" and
"1 of 6" open transactions and naming none: the denominator moves with the traffic.  Now the summary
names the failing transactions, and once the share has passed the threshold the condition holds for as
long as any of them still fails, so a poll with more healthy traffic neither rewrites nor drops it.
"""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fixtures import sessions  # noqa: F401  (fixture)
from tests.alerting.helpers import CLUSTER, alerts, at, rules, step
from txnwatch.alerting.conditions import VERIFICATION_FAILURE_RATE
from txnwatch.alerting.from_findings import ConditionBuilder
from txnwatch.core.config import AlertRuleConfig
from txnwatch.core.findings import Findings, VerificationCheck
from txnwatch.core.model import TopicPartition

STUCK = (TopicPartition("demo-in", 0), 1003, None)


def poll(checks: int, failing: tuple[tuple[TopicPartition, int, str | None], ...] = (STUCK,)) -> Findings:
    return Findings(CLUSTER, 0, verification=VerificationCheck(checks, len(failing), (), failing))


def test_the_summary_names_the_failing_transactions_not_a_moving_share() -> None:
    builder = ConditionBuilder(CLUSTER, "broker-1:9092")
    summaries = {c.summary for checks in (3, 2, 6) for c in builder.build(poll(checks), None, 0)
                 if c.rule == VERIFICATION_FAILURE_RATE}
    assert summaries == {f"[{CLUSTER}] open transactions on partitions their coordinator does not list: "
                         "demo-in-0 (producer 1003, no transactional id)"}


def test_a_share_dipping_under_the_threshold_keeps_the_condition_while_the_same_pair_fails() -> None:
    builder = ConditionBuilder(CLUSTER, "broker-1:9092", verification_failure_ratio=0.2)

    def holds(findings: Findings) -> bool:
        return any(c.rule == VERIFICATION_FAILURE_RATE for c in builder.build(findings, None, 0))

    assert not holds(poll(6))  # 1 of 6 never passed 0.2: nothing to settle
    assert [holds(poll(n)) for n in (3, 6, 2, 6)] == [True, True, True, True]  # 1 of 3 passed it: it holds
    assert not holds(poll(6, failing=()))  # the transaction ended: it clears
    assert not holds(poll(6))  # and a new dip under the threshold does not bring it back


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_one_pending_alert_that_fires_after_its_for(sessions: sessionmaker[Session]) -> None:
    builder = ConditionBuilder(CLUSTER, "broker-1:9092", verification_failure_ratio=0.2)
    rule_set = rules(verification_failure_rate=AlertRuleConfig(for_seconds=30))
    for second, checks in ((0, 3), (10, 6), (20, 2), (30, 6)):
        step(sessions, builder.build(poll(checks), None, 0), at(second), rule_set)
    (alert,) = alerts(sessions)
    assert (alert.state, alert.started_at.replace(tzinfo=None)) == ("firing", at(0).replace(tzinfo=None))
    assert alert.details["failing"] == [{"topic": "demo-in", "partition": 0, "producer_id": 1003,
                                         "transactional_id": None}]
