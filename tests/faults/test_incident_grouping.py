"""One root cause, one page (issue 15, defect 7).

A hanging transaction pinned the LSO of its partition and paged twice: ``hanging_transaction``
and ``lso_stall``, two incidents, two dedup keys.  Findings about one producer id now fold
into one incident whose key never changes while it is open; the others ride along in its
details.  The lab run is tests/e2e/test_hanging_alert.py.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fixtures import sessions  # noqa: F401  (fixture)
from tests.alerting.helpers import CLUSTER, alerts, at, hanging, outbox, rules, step
from txnwatch.alerting.conditions import (
    LSO_STALL,
    TRANSACTION_TIMEOUT_EXCEEDED,
    Condition,
    partition_stall_key,
    producer_group,
    transaction_incident_key,
)
from txnwatch.alerting.from_findings import ConditionBuilder
from txnwatch.core.config import AlertRuleConfig

PID = 4001


def stall(partition: int = 0, blocker: int | None = PID) -> Condition:
    return Condition(LSO_STALL, partition_stall_key(LSO_STALL, CLUSTER, "orders", partition), CLUSTER,
                     f"[{CLUSTER}] LSO of orders-{partition} stuck", {"topic": "orders", "partition": str(partition)},
                     {"blocking_producer_id": blocker, "hwm_minus_lso": 500})


def overdue(pid: int = PID) -> Condition:
    return Condition(TRANSACTION_TIMEOUT_EXCEEDED,
                     transaction_incident_key(TRANSACTION_TIMEOUT_EXCEEDED, CLUSTER, "payments-1", pid), CLUSTER,
                     "[prod] transaction payments-1 open past its timeout", {}, {"producer_id": pid})


def grouped(*conditions: Condition) -> list[Condition]:
    """What ConditionBuilder.build hands the evaluator."""
    builder = ConditionBuilder(CLUSTER, "broker-1:9092")
    return [builder._grouped(c) for c in conditions]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_stall_then_hanging_then_timeout_is_one_incident(sessions: sessionmaker[Session]) -> None:
    rule_set = rules(for_seconds=0, lso_stall=AlertRuleConfig(for_seconds=0),
                     transaction_timeout_exceeded=AlertRuleConfig(for_seconds=0))
    step(sessions, grouped(stall()), at(0), rule_set)  # the stall is seen first and pages
    step(sessions, grouped(stall(), hanging(0), hanging(1), overdue()), at(15), rule_set)
    step(sessions, grouped(hanging(0), hanging(1)), at(30), rule_set)  # e.g. right after a restart
    (open_,) = [a for a in alerts(sessions) if a.state == "firing"]
    assert open_.incident_key == stall().incident_key and open_.details["incident_group"] == producer_group(CLUSTER, PID)
    assert open_.rule == LSO_STALL and open_.details["root_cause"] == "hanging_transaction"  # key kept, cause named
    assert [r["incident_key"] for r in open_.details["related"]] == [hanging(1).incident_key]
    # The most telling finding titles the incident; the rest are named by their titles, never by rule id.
    assert open_.summary == hanging(0).summary + " (+1 related: Hanging transaction)"
    step(sessions, [], at(45), rule_set)
    events = outbox(sessions)
    assert [(e.action, e.dedup_key) for e in events] == [("trigger", stall().incident_key)] * 2 + [
        ("resolve", stall().incident_key)], "one incident: the update reuses the dedup key"
    assert events[0].payload["summary"].startswith(stall().summary)
    assert events[1].payload["summary"].startswith(hanging(0).summary), "the update names the root cause"
    assert events[1].payload["details"]["root_cause"] == "hanging_transaction"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_hanging_joining_a_pending_stall_pages_at_once(sessions: sessionmaker[Session]) -> None:
    """A pending stall has paged nothing: the hanging transaction (for: 0) leads and pages now, not after the
    stall's own for: (the demo's hanging page came minutes late that way)."""
    rule_set = rules(for_seconds=0, lso_stall=AlertRuleConfig(for_seconds=600))
    step(sessions, grouped(stall()), at(0), rule_set)
    assert [a.state for a in alerts(sessions)] == ["pending"]
    step(sessions, grouped(stall(), hanging(0)), at(15), rule_set)
    (firing,) = [a for a in alerts(sessions) if a.state == "firing"]
    assert firing.incident_key == hanging(0).incident_key
    assert [r["rule"] for r in firing.details["related"]] == ["lso_stall"]
    assert [(e.action, e.dedup_key) for e in outbox(sessions)] == [("trigger", hanging(0).incident_key)]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_other_producers_and_unknown_blockers_stay_apart(sessions: sessionmaker[Session]) -> None:
    rule_set = rules(for_seconds=0, lso_stall=AlertRuleConfig(for_seconds=0))
    step(sessions, grouped(hanging(0, PID), hanging(0, 9), stall(1, None), stall(0, PID)), at(0), rule_set)
    keys = sorted(a.incident_key for a in alerts(sessions) if a.state == "firing")
    assert keys == sorted([hanging(0, PID).incident_key, hanging(0, 9).incident_key, stall(1, None).incident_key])


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_disabled_rules_never_lead(sessions: sessionmaker[Session]) -> None:
    rule_set = rules(for_seconds=0, lso_stall=AlertRuleConfig(enabled=False))
    step(sessions, grouped(stall(), hanging(0)), at(0), rule_set)
    assert [a.incident_key for a in alerts(sessions)] == [hanging(0).incident_key]
    assert alerts(sessions)[0].details["related"] == []


def test_grouping_keys_follow_the_producer() -> None:
    a, b, c = grouped(hanging(0), stall(3), replace(stall(4), details={"blocking_producer_id": None}))
    assert a.group == b.group == producer_group(CLUSTER, PID) and c.group is None
