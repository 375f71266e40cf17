"""The alert state machine and its rules, on SQLite and PostgreSQL (no HTTP)."""

from __future__ import annotations

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import CLUSTER, alerts, at, hanging, outbox, rules, step
from txnwatch.alerting import Condition, evaluate
from txnwatch.alerting.conditions import (
    CLUSTER_DOWN,
    HANGING_TRANSACTION,
    LSO_STALL,
    cluster_down,
    partition_stall_key,
)
from txnwatch.alerting.rules import DEFAULT_RULES, effective_rules
from txnwatch.core.config import AlertRuleConfig, Settings


def actions(sessions: sessionmaker[Session]) -> list[tuple[str, str]]:
    return [(e.action, e.dedup_key) for e in outbox(sessions)]


def test_zero_for_fires_at_first_sight(sessions: sessionmaker[Session]) -> None:
    step(sessions, [hanging()], at(0), rules(for_seconds=0))
    assert [(a.state, a.fired_at) for a in alerts(sessions)] == [("firing", at(0))]
    assert actions(sessions) == [("trigger", hanging().incident_key)]


def test_outbox_row_is_written_with_the_state_change(sessions: sessionmaker[Session]) -> None:
    with pytest.raises(RuntimeError), sessions.begin() as session:
        evaluate(session, CLUSTER, [hanging()], at(0), rules(for_seconds=0))
        raise RuntimeError("crash before commit")
    assert alerts(sessions) == [] and outbox(sessions) == []


def test_outbox_payload_holds_no_secret_and_a_frozen_snapshot(sessions: sessionmaker[Session]) -> None:
    step(sessions, [hanging()], at(0), rules(for_seconds=0))
    changed = hanging()
    changed = Condition(changed.rule, changed.incident_key, changed.cluster, "changed later", changed.labels,
                        {"age_seconds": 2000})
    step(sessions, [changed], at(10), rules(for_seconds=0))
    (event,) = outbox(sessions)
    assert "routing_key" not in event.payload
    assert event.payload["summary"].startswith("[prod] hanging transaction")
    (alert,) = alerts(sessions)
    assert alert.summary == "changed later" and alert.details == {"age_seconds": 2000} and alert.last_seen_at == at(10)


def test_reoccurrence_after_resolve_is_a_new_alert_with_the_same_dedup_key(sessions: sessionmaker[Session]) -> None:
    rs = rules(for_seconds=0)
    key = hanging().incident_key
    step(sessions, [hanging()], at(0), rs)
    step(sessions, [], at(10), rs)
    step(sessions, [hanging()], at(20), rs)
    assert actions(sessions) == [("trigger", key), ("resolve", key), ("trigger", key)]
    assert [a.state for a in alerts(sessions)] == ["resolved", "firing"]


def test_disabled_rule_never_fires_and_disabling_resolves(sessions: sessionmaker[Session]) -> None:
    off = rules(for_seconds=0, hanging_transaction=AlertRuleConfig(enabled=False))
    step(sessions, [hanging()], at(0), off)
    assert alerts(sessions) == []
    step(sessions, [hanging()], at(10), rules(for_seconds=0))
    step(sessions, [hanging()], at(20), off)
    assert [a.action for a in outbox(sessions)] == ["trigger", "resolve"]


def test_cluster_down_freezes_the_clusters_other_alerts(sessions: sessionmaker[Session]) -> None:
    rs = effective_rules({HANGING_TRANSACTION: AlertRuleConfig(for_seconds=0),
                          CLUSTER_DOWN: AlertRuleConfig(for_seconds=30)})
    pending_one = hanging(1)
    step(sessions, [hanging(0)], at(0), rs)
    step(sessions, [hanging(0), pending_one], at(5), rules(for_seconds=100))
    down = cluster_down(CLUSTER, "timed out", 10)
    for t in (10, 20, 39):
        step(sessions, [down], at(t), rs)
    assert [a.action for a in outbox(sessions)] == ["trigger"]  # nothing resolved, nothing dropped
    step(sessions, [down], at(40), rs)
    assert actions(sessions)[-1] == ("trigger", f"{CLUSTER_DOWN}/{CLUSTER}")
    assert {a.incident_key: a.state for a in alerts(sessions)} == {
        hanging(0).incident_key: "firing", pending_one.incident_key: "pending", down.incident_key: "firing"}
    step(sessions, [hanging(0)], at(50), rs)  # back up: down resolves, absent ones clear
    assert {a.incident_key: a.state for a in alerts(sessions)} == {
        hanging(0).incident_key: "firing", down.incident_key: "resolved"}


def test_clusters_are_evaluated_independently(sessions: sessionmaker[Session]) -> None:
    rs = rules(for_seconds=0)
    step(sessions, [hanging(cluster="a")], at(0), rs, cluster="a")
    step(sessions, [hanging(cluster="b")], at(0), rs, cluster="b")
    step(sessions, [], at(10), rs, cluster="a")
    assert {a.incident_key: a.state for a in alerts(sessions)} == {
        hanging(cluster="a").incident_key: "resolved", hanging(cluster="b").incident_key: "firing"}


def test_condition_of_another_cluster_is_refused(sessions: sessionmaker[Session]) -> None:
    with pytest.raises(ValueError, match="cluster"), sessions.begin() as session:
        evaluate(session, "a", [hanging(cluster="b")], at(0), rules())


def test_severity_and_labels_from_config(sessions: sessionmaker[Session]) -> None:
    rs = effective_rules({LSO_STALL: AlertRuleConfig(severity="warning", labels={"team": "data"})})
    stall = Condition(LSO_STALL, partition_stall_key(LSO_STALL, CLUSTER, "orders", 3), CLUSTER, "LSO stalled",
                      {"topic": "orders"}, {})
    step(sessions, [stall], at(0), rs)
    step(sessions, [stall], at(DEFAULT_RULES[LSO_STALL].for_seconds), rs)
    (alert,) = alerts(sessions)
    assert alert.state == "firing" and alert.severity == "warning"
    assert alert.labels == {"team": "data", "topic": "orders", "cluster": CLUSTER, "rule": LSO_STALL}


def test_overrides_keep_unset_defaults() -> None:
    settings = Settings(alert_rules={"lso_stall": {"severity": "warning"}, "custom": {"for_seconds": 5}})
    rs = effective_rules(settings.alert_rules)
    assert rs[LSO_STALL].severity == "warning" and rs[LSO_STALL].for_seconds == DEFAULT_RULES[LSO_STALL].for_seconds
    assert rs["custom"].for_seconds == 5 and rs[HANGING_TRANSACTION] == DEFAULT_RULES[HANGING_TRANSACTION]


def test_duplicate_conditions_in_one_poll_count_once(sessions: sessionmaker[Session]) -> None:
    step(sessions, [hanging(), hanging()], at(0), rules(for_seconds=0))
    assert len(alerts(sessions)) == 1 and len(outbox(sessions)) == 1


def test_raw_settings_rules_are_merged_over_defaults(sessions: sessionmaker[Session]) -> None:
    raw = Settings(alert_rules={"hanging_transaction": {"severity": "warning"}}).alert_rules
    step(sessions, [hanging()], at(0), raw)
    step(sessions, [hanging()], at(DEFAULT_RULES[HANGING_TRANSACTION].for_seconds - 1), raw)
    assert [a.state for a in alerts(sessions)] == ["pending"]
    step(sessions, [hanging()], at(DEFAULT_RULES[HANGING_TRANSACTION].for_seconds), raw)
    assert [(a.state, a.severity) for a in alerts(sessions)] == [("firing", "warning")]


def test_retire_clusters_resolves_alerts_of_removed_clusters(sessions: sessionmaker[Session]) -> None:
    from txnwatch.alerting.evaluator import retire_clusters

    step(sessions, [hanging(cluster="gone")], at(0), rules(for_seconds=0), cluster="gone")
    step(sessions, [hanging(cluster="gone", partition=1)], at(0), rules(for_seconds=0), cluster="gone")
    step(sessions, [hanging(cluster="kept")], at(0), rules(for_seconds=0), cluster="kept")
    step(sessions, [hanging(cluster="gone", partition=1), hanging(cluster="gone", partition=2)], at(1),
         rules(for_seconds=60), cluster="gone")  # partition 2 only pending
    with sessions.begin() as session:
        retired = retire_clusters(session, ["kept"], at(2))
    assert retired == [hanging(cluster="gone", partition=1).incident_key]
    assert {a.incident_key: a.state for a in alerts(sessions)} == {
        hanging(cluster="gone").incident_key: "resolved", hanging(cluster="gone", partition=1).incident_key: "resolved",
        hanging(cluster="kept").incident_key: "firing"}
    assert [e.action for e in outbox(sessions)].count("resolve") == 2


def test_pending_restarts_its_for_clock_after_a_gap(sessions: sessionmaker[Session]) -> None:
    rs = rules(for_seconds=60)
    with sessions.begin() as session:
        evaluate(session, CLUSTER, [hanging()], at(0), rs, max_gap_seconds=75)
    with sessions.begin() as session:  # nobody watched between 0 and 100
        assert not evaluate(session, CLUSTER, [hanging()], at(100), rs, max_gap_seconds=75).fired
    with sessions.begin() as session:
        assert not evaluate(session, CLUSTER, [hanging()], at(159), rs, max_gap_seconds=75).fired
    with sessions.begin() as session:
        assert evaluate(session, CLUSTER, [hanging()], at(160), rs, max_gap_seconds=75).fired
