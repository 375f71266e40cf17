"""The alert state machine's correctness proof: one numbered row per transition of alerting/machine.py.

In the manner of Burrow's evaluator tests (core/internal/evaluator/caching_test.go), each row is one
poll: the open alerts before it, the conditions that hold, the moment, and what must come out: the
open alerts after it and the changes, in order.  No database and no clock: the machine is pure,
and the evaluator that applies its changes to rows and the outbox is tested in test_evaluator.py,
test_flow.py and test_state_machine.py.

When adding a row:
  1) Times are seconds after T0.  Every rule has ``for: 60`` unless the row says otherwise,
     ``cluster_down`` has ``for: 30``; the gap window (``max_gap_seconds``) is 90.
  2) Names stand for conditions: X (a cluster-wide one, no group), Y (a hanging transaction of a
     producer with no group), H0/H1 (hanging on orders-0/-1) and S0 (the LSO stall of orders-0),
     which all belong to producer 7's group, and D (cluster_down).  ``v`` is the version of a
     condition's summary and details, to see which poll's text an alert keeps.
  3) An alert after the poll reads A(state, since, last seen, fired, severity, root cause, v).
  4) Comment each row with its number, the transition, and why the expected result is right.
  5) A changed row needs its reason in the commit message: this table is what the evaluator promises.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from txnwatch.alerting import machine
from txnwatch.alerting.conditions import (
    CLUSTER_DOWN,
    HANGING_TRANSACTION,
    LSO_STALL,
    VERIFICATION_FAILURE_RATE,
    Condition,
    cluster_incident_key,
    partition_incident_key,
    partition_stall_key,
    producer_group,
)
from txnwatch.alerting.grouping import GROUP_DETAIL, ROOT_CAUSE
from txnwatch.alerting.machine import DROPPED, FIRED, FIRING, OPENED, PENDING, RESOLVED, RETITLED, OpenAlert
from txnwatch.alerting.rules import effective_rules
from txnwatch.core.config import AlertRuleConfig

T0 = datetime(2026, 11, 23, tzinfo=timezone.utc)
CLUSTER = "prod"
GROUP = producer_group(CLUSTER, 7)
GAP = 90.0

#: name -> (rule, incident key, group)
NAMES: dict[str, tuple[str, str, str | None]] = {
    "X": (VERIFICATION_FAILURE_RATE, cluster_incident_key(VERIFICATION_FAILURE_RATE, CLUSTER), None),
    "Y": (HANGING_TRANSACTION, partition_incident_key(HANGING_TRANSACTION, CLUSTER, "orders", 5, 9), None),
    "H0": (HANGING_TRANSACTION, partition_incident_key(HANGING_TRANSACTION, CLUSTER, "orders", 0, 7), GROUP),
    "H1": (HANGING_TRANSACTION, partition_incident_key(HANGING_TRANSACTION, CLUSTER, "orders", 1, 7), GROUP),
    "S0": (LSO_STALL, partition_stall_key(LSO_STALL, CLUSTER, "orders", 0), GROUP),
    "D": (CLUSTER_DOWN, cluster_incident_key(CLUSTER_DOWN, CLUSTER), None),
    "D'": (CLUSTER_DOWN, cluster_incident_key(CLUSTER_DOWN, CLUSTER) + "/as-an-older-release-spelled-it", None),
}
BY_KEY = {key: name for name, (_, key, _) in NAMES.items()}


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def rules(**overrides: dict[str, Any]) -> dict[str, AlertRuleConfig]:
    base: dict[str, dict[str, Any]] = {rule: {"for_seconds": 60, "severity": "critical"}
                                       for rule in (VERIFICATION_FAILURE_RATE, HANGING_TRANSACTION, LSO_STALL)}
    base[CLUSTER_DOWN] = {"for_seconds": 30, "severity": "critical"}
    for rule, fields in overrides.items():
        base[rule] = {**base.get(rule, {}), **fields}
    return effective_rules({rule: AlertRuleConfig(**fields) for rule, fields in base.items()})


def holds(name: str, v: int = 1) -> Condition:
    rule, key, group = NAMES[name]
    return Condition(rule, key, CLUSTER, f"{name} v{v}", {"topic": "orders"}, {"v": v}, group)


def was(name: str, state: str, since: float, seen: float | None = None, fired: float | None = None,
        severity: str = "critical", root: str | None = None, v: int = 1, group: Any = None) -> OpenAlert:
    """An open alert before the poll, as the evaluator loads it from its row."""
    rule, key, own_group = NAMES[name]
    details: dict[str, Any] = {"v": v}
    if group is not None or own_group is not None:
        details[GROUP_DETAIL] = group if group is not None else own_group
    if root is not None:
        details[ROOT_CAUSE] = root
    return OpenAlert(rule=rule, incident_key=key, state=PENDING if state == PENDING else FIRING, severity=severity,
                     summary=f"{name} v{v}", labels={}, details=details, started_at=at(since),
                     last_seen_at=at(seen if seen is not None else since), fired_at=None if fired is None else at(fired))


class A(NamedTuple):
    """An open alert after the poll, as much of it as the machine decides."""

    state: str
    since: float
    seen: float
    fired: float | None = None
    severity: str = "critical"
    root: str | None = None
    v: int = 1


def seconds(moment: datetime | None) -> float | None:
    return None if moment is None else (moment - T0).total_seconds()


def read(alert: OpenAlert) -> A:
    return A(alert.state, seconds(alert.started_at) or 0.0, seconds(alert.last_seen_at) or 0.0,
             seconds(alert.fired_at), str(alert.severity), alert.details.get(ROOT_CAUSE), alert.details.get("v", 0))


@dataclass(frozen=True)
class Case:
    before: list[OpenAlert]
    conditions: list[Condition]
    now: float
    after: dict[str, A]
    changes: list[tuple[str, str]]
    rules: dict[str, AlertRuleConfig] = field(default_factory=rules)
    max_gap: float | None = GAP
    retire: bool = False


CASES = [
    # 0 - nothing open, nothing holds: nothing happens.  The quiet cluster, every poll.
    pytest.param(Case([], [], 0, {}, []), id="00-nothing-stays-nothing"),

    # 1 - nothing -> pending: a condition seen for the first time opens a pending alert; its for: clock starts now.
    pytest.param(Case([], [holds("X")], 0, {"X": A(PENDING, 0, 0)}, [(OPENED, "X")]), id="01-nothing-to-pending"),

    # 2 - nothing -> firing: with for: 0 the alert opens and fires in the same poll (a hanging transaction
    #     pages at once: detection already waited its own threshold).
    pytest.param(Case([], [holds("X")], 0, {"X": A(FIRING, 0, 0, fired=0)}, [(OPENED, "X"), (FIRED, "X")],
                      rules=rules(verification_failure_rate={"for_seconds": 0})), id="02-nothing-to-firing-for-0"),

    # 3 - pending -> pending: held 59 s of 60; it stays pending, takes this poll's text (v2) and last-seen,
    #     and keeps its clock.
    pytest.param(Case([was("X", PENDING, 0, seen=45)], [holds("X", v=2)], 59, {"X": A(PENDING, 0, 59, v=2)}, []),
                 id="03-pending-holds-before-for"),

    # 4 - pending -> firing: held exactly for: (60 s since it started, counted from started_at, not from the
    #     last poll at 30): it fires now, one trigger.  The comparison is >=, as Prometheus' for:.
    pytest.param(Case([was("X", PENDING, 0, seen=30)], [holds("X")], 60, {"X": A(FIRING, 0, 60, fired=60)},
                      [(FIRED, "X")]), id="04-pending-to-firing-at-for"),

    # 5 - pending -> cleared before for:: the condition is gone after 30 s; the alert paged nothing, so it is
    #     dropped (its row deleted), not resolved: flapping below for: never reaches PagerDuty.
    pytest.param(Case([was("X", PENDING, 0)], [], 30, {}, [(DROPPED, "X")]), id="05-pending-cleared-before-for"),

    # 6 - firing -> firing: the condition still holds with new figures (v3); the row follows them, but nothing
    #     is queued: an incident's age growing is no news for PagerDuty.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60)], [holds("X", v=3)], 120,
                      {"X": A(FIRING, 0, 120, fired=60, v=3)}, []), id="06-firing-holds"),

    # 7 - firing -> resolved: the condition is gone; the alert leaves the open set and its resolve is queued.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60)], [], 120, {}, [(RESOLVED, "X")]),
                 id="07-firing-to-resolved"),

    # 8 - resolved -> pending again: a resolved alert is not open (the evaluator loads pending and firing rows
    #     only), so the same condition coming back opens a new alert under the same key, with a fresh clock.
    pytest.param(Case([], [holds("X")], 500, {"X": A(PENDING, 500, 500)}, [(OPENED, "X")]),
                 id="08-resolved-to-pending-again"),

    # 9 - pending, unwatched for longer than the gap window (100 s > 90: txnwatch was down, or another replica
    #     led): nobody saw it hold, so its clock restarts now and it does not fire, though 100 s > for:.
    pytest.param(Case([was("X", PENDING, 0)], [holds("X")], 100, {"X": A(PENDING, 100, 100)}, []),
                 id="09-pending-clock-restarts-after-gap"),

    # 10 - pending, unwatched for exactly the gap window (90 s): that is not longer than it, so the clock runs
    #      on and the alert fires (120 s since it started).
    pytest.param(Case([was("X", PENDING, 0, seen=30)], [holds("X")], 120, {"X": A(FIRING, 0, 120, fired=120)},
                      [(FIRED, "X")]), id="10-pending-gap-equal-to-window-keeps-clock"),

    # 11 - no gap window (max_gap_seconds=None: tests and tools): a pending alert's clock never restarts.
    pytest.param(Case([was("X", PENDING, 0)], [holds("X")], 1000, {"X": A(FIRING, 0, 1000, fired=1000)},
                      [(FIRED, "X")], max_gap=None), id="11-no-gap-window"),

    # 12 - firing, unwatched for long: the gap restarts only a pending clock; a firing alert keeps its start
    #      (the page already out says "since" it) and queues nothing.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60)], [holds("X")], 1000,
                      {"X": A(FIRING, 0, 1000, fired=60)}, []), id="12-firing-ignores-gap"),

    # 13 - severity at open: a pending alert opens with its rule's severity.
    pytest.param(Case([], [holds("X")], 0, {"X": A(PENDING, 0, 0, severity="warning")}, [(OPENED, "X")],
                      rules=rules(verification_failure_rate={"severity": "warning"})), id="13-severity-at-open"),

    # 14 - severity at firing: the rule's severity changed while the alert was pending (a reload); it pages
    #      with the severity the rule has now, not the one it opened with.
    pytest.param(Case([was("X", PENDING, 0)], [holds("X")], 60, {"X": A(FIRING, 0, 60, fired=60, severity="warning")},
                      [(FIRED, "X")], rules=rules(verification_failure_rate={"severity": "warning"})),
                 id="14-severity-taken-when-firing"),

    # 15 - severity of a firing alert: the rule's severity changed after it paged; the alert keeps the severity
    #      its page carries (a change would need a new page) and queues nothing.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60)], [holds("X")], 120,
                      {"X": A(FIRING, 0, 120, fired=60)}, [], rules=rules(verification_failure_rate={"severity": "warning"})),
                 id="15-firing-keeps-its-severity"),

    # 16 - cluster_down opens while the cluster's other alerts are frozen: X firing and Y pending are neither
    #      refreshed (last seen stays) nor cleared, though their conditions are absent: a failed poll says
    #      nothing about them, and resolving every page whenever a broker blips would be worse than waiting.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60), was("Y", PENDING, 40, seen=60)], [holds("D")], 100,
                      {"X": A(FIRING, 0, 60, fired=60), "Y": A(PENDING, 40, 60), "D": A(PENDING, 100, 100)},
                      [(OPENED, "D")]), id="16-cluster-down-freezes-the-rest"),

    # 17 - cluster_down -> firing after its own for: (30 s); Y stays frozen, its own for: does not run on.
    pytest.param(Case([was("Y", PENDING, 40, seen=60), was("D", PENDING, 100)], [holds("D")], 130,
                      {"Y": A(PENDING, 40, 60), "D": A(FIRING, 100, 130, fired=130)}, [(FIRED, "D")]),
                 id="17-cluster-down-fires-others-stay-frozen"),

    # 18 - the cluster answers again: cluster_down resolves, and what was frozen is judged by this poll: X still
    #      holds (refreshed), Y is gone (dropped: it never paged).  Changes come in the open alerts' order.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60), was("Y", PENDING, 40, seen=60),
                       was("D", FIRING, 100, seen=130, fired=130)], [holds("X", v=2)], 200,
                      {"X": A(FIRING, 0, 200, fired=60, v=2)}, [(DROPPED, "Y"), (RESOLVED, "D")]),
                 id="18-cluster-back-unfreezes"),

    # 19 - cluster_down with its rule disabled still freezes the others: not paging for an unreachable cluster
    #      does not make its failed poll an all-clear.  The disabled rule opens nothing itself.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60)], [holds("D")], 100, {"X": A(FIRING, 0, 60, fired=60)},
                      [], rules=rules(cluster_down={"enabled": False})), id="19-disabled-cluster-down-still-freezes"),

    # 20 - a cluster_down alert is never frozen by another one: D' (a key an older release spelled) is about
    #      the same thing as D, and it does not hold; it resolves while D opens.
    pytest.param(Case([was("D'", FIRING, 0, seen=40, fired=30)], [holds("D")], 100, {"D": A(PENDING, 100, 100)},
                      [(OPENED, "D"), (RESOLVED, "D'")]), id="20-cluster-down-alerts-never-frozen"),

    # 21 - a disabled rule opens nothing, however long its condition holds.
    pytest.param(Case([], [holds("X")], 0, {}, [], rules=rules(verification_failure_rate={"enabled": False})),
                 id="21-disabled-rule-opens-nothing"),

    # 22 - disabling a rule clears its open alerts although their conditions hold, and even while the cluster
    #      is down (the condition is there, so nothing is frozen): the firing X resolves, the pending Y drops.
    pytest.param(Case([was("X", FIRING, 0, seen=60, fired=60), was("Y", PENDING, 50, seen=60)],
                      [holds("X"), holds("Y"), holds("D")], 100, {"D": A(PENDING, 100, 100)},
                      [(OPENED, "D"), (RESOLVED, "X"), (DROPPED, "Y")],
                      rules=rules(verification_failure_rate={"enabled": False}, hanging_transaction={"enabled": False})),
                 id="22-disabling-clears-even-when-blind"),

    # 23 - one root cause, one incident: a hanging transaction and the LSO stall it causes open one alert, led
    #      by the most telling finding (hanging), whose key and root cause it takes.
    pytest.param(Case([], [holds("S0"), holds("H0")], 0, {"H0": A(PENDING, 0, 0, root=HANGING_TRANSACTION)},
                      [(OPENED, "H0")]), id="23-group-opens-one-incident"),

    # 24 - a pending group re-leads: the stall was pending (it paged nothing), a hanging transaction (for: 0)
    #      joins; the hanging one leads and pages now, the stall's pending alert drops (the demo's page came
    #      minutes late when the pending stall kept the lead and its for:).
    pytest.param(Case([was("S0", PENDING, 0, root=LSO_STALL)], [holds("S0"), holds("H0")], 15,
                      {"H0": A(FIRING, 15, 15, fired=15, root=HANGING_TRANSACTION)},
                      [(OPENED, "H0"), (FIRED, "H0"), (DROPPED, "S0")],
                      rules=rules(hanging_transaction={"for_seconds": 0})), id="24-pending-group-re-leads"),

    # 25 - firing -> retitled: the stall paged first; now Kafka calls the transaction hanging.  The incident
    #      keeps its key (PagerDuty must not see a resolve and a new trigger for one cause) and is retitled by
    #      its root cause: a trigger under the same key with the new text.
    pytest.param(Case([was("S0", FIRING, 0, fired=0, root=LSO_STALL)], [holds("S0", v=2), holds("H0", v=2)], 15,
                      {"S0": A(FIRING, 0, 15, fired=0, root=HANGING_TRANSACTION, v=2)}, [(RETITLED, "S0")]),
                 id="25-firing-group-retitled-by-root-cause"),

    # 26 - firing, same root cause: another member joins (H1) but the root cause is still hanging: the row
    #      follows, nothing is queued (a retitle is for a new cause, not for every new member).
    pytest.param(Case([was("S0", FIRING, 0, seen=15, fired=0, root=HANGING_TRANSACTION)],
                      [holds("S0"), holds("H0", v=3), holds("H1")], 30,
                      {"S0": A(FIRING, 0, 30, fired=0, root=HANGING_TRANSACTION, v=3)}, []),
                 id="26-firing-group-same-root-no-retitle"),

    # 27 - the lead's own finding is gone (after a restart, before the stall is timed again) but its group
    #      still holds: the firing incident keeps its key, nothing resolves and nothing is queued.
    pytest.param(Case([was("S0", FIRING, 0, seen=30, fired=0, root=HANGING_TRANSACTION)], [holds("H0", v=4)], 45,
                      {"S0": A(FIRING, 0, 45, fired=0, root=HANGING_TRANSACTION, v=4)}, []),
                 id="27-firing-group-outlives-its-lead-finding"),

    # 28 - the whole group is gone: the incident resolves under the key it paged with.
    pytest.param(Case([was("S0", FIRING, 0, seen=45, fired=0, root=HANGING_TRANSACTION)], [], 60, {},
                      [(RESOLVED, "S0")]), id="28-group-gone-resolves"),

    # 29 - a group with a pending and a firing alert (the pending one listed first): the firing one keeps the
    #      key, since its page is out, and the pending one drops.
    pytest.param(Case([was("H1", PENDING, 10, root=HANGING_TRANSACTION),
                       was("S0", FIRING, 0, seen=10, fired=0, root=HANGING_TRANSACTION)],
                      [holds("S0"), holds("H0"), holds("H1")], 20,
                      {"S0": A(FIRING, 0, 20, fired=0, root=HANGING_TRANSACTION)}, [(DROPPED, "H1")]),
                 id="29-firing-alert-of-a-group-wins-over-pending"),

    # 30 - an unreadable group detail (a row's JSON is never trusted: here a list) puts the alert in no group:
    #      the group is led afresh (H0 opens) and the old alert, whose key no condition has, resolves.
    pytest.param(Case([was("S0", FIRING, 0, fired=0, group=[GROUP])], [holds("S0"), holds("H0")], 15,
                      {"H0": A(PENDING, 15, 15, root=HANGING_TRANSACTION)}, [(OPENED, "H0"), (RESOLVED, "S0")]),
                 id="30-unreadable-group-detail"),

    # 31 - a disabled rule's finding never leads or joins a group: with hanging disabled, the stall alone
    #      leads (its own root cause), and the disabled hanging opens nothing.
    pytest.param(Case([], [holds("S0"), holds("H0")], 0, {"S0": A(PENDING, 0, 0, root=LSO_STALL)}, [(OPENED, "S0")],
                      rules=rules(hanging_transaction={"enabled": False})), id="31-disabled-rule-never-leads"),

    # 32 - one condition twice in one poll (two code paths found it) is one alert.
    pytest.param(Case([], [holds("X"), holds("X", v=2)], 0, {"X": A(PENDING, 0, 0, v=2)}, [(OPENED, "X")]),
                 id="32-duplicate-condition-counts-once"),

    # 33 - retire (the cluster left the configuration): what paged resolves, what did not drops, whatever holds.
    pytest.param(Case([was("X", FIRING, 0, fired=0), was("Y", PENDING, 0)], [], 10, {},
                      [(RESOLVED, "X"), (DROPPED, "Y")], retire=True), id="33-retired-cluster"),
]


@pytest.mark.parametrize("case", CASES)
def test_transition(case: Case) -> None:
    before = {alert.incident_key: alert for alert in case.before}
    if case.retire:
        step = machine.retire(before)
    else:
        step = machine.advance(before, case.conditions, at(case.now), case.rules, max_gap_seconds=case.max_gap)
    assert {BY_KEY[key]: read(alert) for key, alert in step.active.items()} == case.after
    assert [(c.kind, BY_KEY[c.incident_key]) for c in step.changes] == case.changes
    for key, alert in step.active.items():
        assert alert.incident_key == key and alert.rule == NAMES[BY_KEY[key]][0], "the key and its rule never change"


def test_an_opened_alert_holds_its_labels_and_json_details_and_keeps_its_labels() -> None:
    """Labels are the rule's, the condition's, the cluster and the rule; details are stored as JSON text."""
    condition = Condition(HANGING_TRANSACTION, NAMES["Y"][1], CLUSTER, "Y", {"topic": "orders"},
                          {"since": at(5), "partitions": frozenset({"orders-5"}), "n": 3})
    rs = rules(hanging_transaction={"labels": {"team": "data"}})
    (opened,) = machine.advance({}, [condition], at(0), rs).active.values()
    assert opened.labels == {"team": "data", "topic": "orders", "cluster": CLUSTER, "rule": HANGING_TRANSACTION}
    assert opened.details == {"since": at(5).isoformat(), "partitions": ["orders-5"], "n": 3}
    later = Condition(condition.rule, condition.incident_key, CLUSTER, "Y later", {"topic": "elsewhere"}, {})
    (held,) = machine.advance({opened.incident_key: opened}, [later], at(10), rs).active.values()
    assert held.labels == opened.labels and held.summary == "Y later"


def test_the_machine_does_no_io() -> None:
    """Pure: no SQLAlchemy, no store, no clock of its own; the evaluator is its only edge."""
    source = Path(machine.__file__).read_text()
    imported = {alias.name for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(ast.parse(source)) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.split(".")[0] in ("sqlalchemy", "time", "httpx")
                or name.startswith(("txnwatch.store", "txnwatch.alerting.outbox", "txnwatch.alerting.evaluator"))}
    assert "datetime.now" not in source and "utcnow" not in source
