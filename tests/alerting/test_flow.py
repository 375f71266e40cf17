"""Evaluator + outbox + PagerDuty against a local Events v2 server, on SQLite and PostgreSQL."""

from __future__ import annotations

import logging

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty
from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import ROUTING_KEY, alerts, at, dispatcher, hanging, outbox, rules, step
from txnwatch.store.db import make_sessionmaker


def test_pending_then_one_trigger_then_one_resolve(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs, send = rules(for_seconds=60), dispatcher(sessions, pagerduty.url)
    cond = hanging()
    step(sessions, [cond], at(0), rs)
    step(sessions, [cond], at(59), rs)
    send.run_once(at(59))
    assert pagerduty.accepted == []
    assert [a.state for a in alerts(sessions)] == ["pending"]

    step(sessions, [cond], at(60), rs)
    assert send.run_once(at(60)).sent == 1
    for t in (75, 90, 600):
        step(sessions, [cond], at(t), rs)
        send.run_once(at(t))
    assert pagerduty.actions() == [("trigger", cond.incident_key)]
    trigger = pagerduty.accepted[0]
    assert trigger["routing_key"] == ROUTING_KEY
    assert trigger["payload"]["severity"] == "critical"
    assert trigger["payload"]["class"] == "hanging_transaction"
    assert trigger["payload"]["source"] == "txnwatch/prod"
    details = trigger["payload"]["custom_details"]
    assert details["transactional_id"] == "payments-1" and details["hwm_minus_lso"] == 1200
    assert details["suggested_action"].startswith("kafka-transactions.sh --bootstrap-server broker-1:9092 abort "
                                                  "--topic orders --partition 0 --producer-id 4001")
    assert details["runbook"] == "docs/runbooks.md#kafkahangingtransaction"
    assert trigger["payload"]["timestamp"].startswith("2026-11-23T00:01:00")

    step(sessions, [], at(700), rs)
    step(sessions, [], at(715), rs)
    send.run_once(at(715))
    assert pagerduty.actions() == [("trigger", cond.incident_key), ("resolve", cond.incident_key)]
    (alert,) = alerts(sessions)
    assert (alert.state, alert.fired_at, alert.resolved_at) == ("resolved", at(60), at(700))
    assert [e.status for e in outbox(sessions)] == ["sent", "sent"]


def test_flapping_before_for_never_pages(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs, send = rules(for_seconds=60), dispatcher(sessions, pagerduty.url)
    for i in range(20):
        step(sessions, [hanging()] if i % 2 == 0 else [], at(i * 20), rs)
        send.run_once(at(i * 20))
    assert pagerduty.requests == 0 and outbox(sessions) == [] and alerts(sessions) == []


def test_restart_neither_duplicates_nor_loses(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                              engine: Engine) -> None:
    rs = rules(for_seconds=30)
    cond = hanging()
    step(sessions, [cond], at(0), rs)
    step(sessions, [cond], at(30), rs)
    dispatcher(sessions, pagerduty.url).run_once(at(30))
    # "Restart": fresh objects, same database.  Condition still there, then gone while nobody dispatches.
    sessions2 = make_sessionmaker(engine)
    step(sessions2, [cond], at(45), rs)
    step(sessions2, [], at(60), rs)
    # Another restart before the resolve was delivered.
    dispatcher(make_sessionmaker(engine), pagerduty.url).run_once(at(61))
    dispatcher(make_sessionmaker(engine), pagerduty.url).run_once(at(62))
    assert pagerduty.actions() == [("trigger", cond.incident_key), ("resolve", cond.incident_key)]


def test_pending_survives_restart_and_fires_on_time(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                                    engine: Engine) -> None:
    rs = rules(for_seconds=60)
    step(sessions, [hanging()], at(0), rs)
    again = make_sessionmaker(engine)
    step(again, [hanging()], at(60), rs)
    dispatcher(again, pagerduty.url).run_once(at(60))
    assert [a for a, _ in pagerduty.actions()] == ["trigger"]


@pytest.mark.parametrize("status", [500, 429, 503])
def test_retries_until_recovery_in_order(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                         status: int) -> None:
    rs, send = rules(for_seconds=0), dispatcher(sessions, pagerduty.url)
    a, b = hanging(0), hanging(1)
    step(sessions, [a, b], at(0), rs)
    step(sessions, [b], at(1), rs)  # a's resolve queued behind its trigger
    pagerduty.fail_next(status, 4)
    t = 1.0
    for _ in range(40):
        send.run_once(at(t))
        t += 5
    assert [x for x in pagerduty.actions() if x[1] == a.incident_key] == [("trigger", a.incident_key),
                                                                           ("resolve", a.incident_key)]
    assert sorted(pagerduty.actions()) == sorted([("trigger", a.incident_key), ("trigger", b.incident_key),
                                                  ("resolve", a.incident_key)])
    events = outbox(sessions)
    assert all(e.status == "sent" for e in events)
    assert max(e.attempts for e in events) > 1
    assert pagerduty.requests == 3 + 4


def test_backoff_is_persisted_and_respected(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs, send = rules(for_seconds=0), dispatcher(sessions, pagerduty.url)
    step(sessions, [hanging()], at(0), rs)
    pagerduty.fail_next(500, 1)
    assert send.run_once(at(0)).retried == 1
    (event,) = outbox(sessions)
    assert event.attempts == 1 and (event.last_error or "").startswith("HTTP 500")
    assert at(1) <= event.next_attempt_at <= at(2)
    assert send.run_once(at(0.5)).sent == 0 and pagerduty.requests == 1  # not due yet
    assert dispatcher(sessions, pagerduty.url).run_once(at(2)).sent == 1


def test_a_resolve_never_overtakes_its_trigger(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs, send = rules(for_seconds=0), dispatcher(sessions, pagerduty.url)
    cond = hanging()
    step(sessions, [cond], at(0), rs)
    pagerduty.fail_next(500, 1)
    send.run_once(at(0))  # trigger now waits for its backoff
    step(sessions, [], at(1), rs)  # resolve is due at once...
    send.run_once(at(1))
    assert pagerduty.accepted == []  # ...but stays behind the trigger
    send.run_once(at(3))
    assert pagerduty.actions() == [("trigger", cond.incident_key), ("resolve", cond.incident_key)]


def test_400_is_not_retried(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                            caplog: pytest.LogCaptureFixture) -> None:
    rs, send = rules(for_seconds=0), dispatcher(sessions, pagerduty.url)
    step(sessions, [hanging()], at(0), rs)
    pagerduty.fail_next(400, 1)
    with caplog.at_level(logging.ERROR):
        stats = send.run_once(at(0))
    assert stats.failed == 1
    for t in (10, 100, 1000):
        send.run_once(at(t))
    assert pagerduty.requests == 1
    (event,) = outbox(sessions)
    assert event.status == "failed" and (event.last_error or "").startswith("HTTP 400")
    assert "FAILED" in caplog.text and ROUTING_KEY not in caplog.text


def test_invalid_event_gets_400_from_the_fake_and_is_failed(sessions: sessionmaker[Session],
                                                            pagerduty: FakePagerDuty) -> None:
    from pydantic import SecretStr

    from txnwatch.alerting import OutboxDispatcher, PagerDutyNotifier
    rs = rules(for_seconds=0)
    step(sessions, [hanging()], at(0), rs)
    blank_key = PagerDutyNotifier(SecretStr(""), events_url=pagerduty.url)
    assert OutboxDispatcher(sessions, {"pagerduty": blank_key}).run_once(at(0)).failed == 1
    (event,) = outbox(sessions)
    assert "routing_key" in (event.last_error or "")


def test_network_errors_retry(sessions: sessionmaker[Session]) -> None:
    rs = rules(for_seconds=0)
    step(sessions, [hanging()], at(0), rs)
    stats = dispatcher(sessions, "http://127.0.0.1:9/v2/enqueue").run_once(at(0))
    assert stats.retried == 1
    (event,) = outbox(sessions)
    assert event.status == "pending" and "network error" in (event.last_error or "")


def test_gives_up_after_max_attempts(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs, send = rules(for_seconds=0), dispatcher(sessions, pagerduty.url, max_attempts=3)
    step(sessions, [hanging()], at(0), rs)
    pagerduty.fail_next(503, 10)
    for t in range(0, 1000, 10):
        send.run_once(at(t))
    assert pagerduty.requests == 3
    assert outbox(sessions)[0].status == "failed"



def test_retry_after_of_a_429_is_honoured(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    rs, send = rules(for_seconds=0), dispatcher(sessions, pagerduty.url)
    step(sessions, [hanging()], at(0), rs)
    pagerduty.retry_after = "30"
    pagerduty.fail_next(429, 1)
    send.run_once(at(0))
    (event,) = outbox(sessions)
    assert event.next_attempt_at == at(30) and (event.last_error or "").startswith("HTTP 429")
    send.run_once(at(29))
    assert pagerduty.accepted == []
    send.run_once(at(30))
    assert len(pagerduty.accepted) == 1


def test_timeouts_retry(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    from pydantic import SecretStr

    from txnwatch.alerting import OutboxDispatcher, PagerDutyNotifier
    step(sessions, [hanging()], at(0), rules(for_seconds=0))
    impatient = OutboxDispatcher(sessions, {"pagerduty": PagerDutyNotifier(SecretStr(ROUTING_KEY),
                                                                            events_url=pagerduty.url,
                                                                            timeout_seconds=0.1)})
    pagerduty.delay_seconds = 0.3
    assert impatient.run_once(at(0)).retried == 1
    (event,) = outbox(sessions)
    assert event.status == "pending" and (event.last_error or "").startswith("timeout")
    pagerduty.delay_seconds = 0
    assert impatient.run_once(at(3600)).sent == 1
