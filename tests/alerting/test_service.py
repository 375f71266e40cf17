"""The daemon-facing glue and the extra channels, end to end against the local server."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty
from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import ROUTING_KEY, at, hanging, outbox
from txnwatch.alerting import Alerting, OutboxDispatcher
from txnwatch.alerting.webhook import SLACK, WEBHOOK, WebhookNotifier
from txnwatch.core.config import Settings


def settings(url: str, **extra: Any) -> Settings:
    return Settings(pagerduty={"enabled": True, "routing_key": ROUTING_KEY, "events_url": url},
                    alert_rules={"hanging_transaction": {"for_seconds": 0}}, **extra)


def wait_for(predicate: object, seconds: float = 5) -> None:
    end = time.monotonic() + seconds
    while not predicate() and time.monotonic() < end:  # type: ignore[operator]  # predicate returns a truthy value, not strictly bool
        time.sleep(0.01)


def test_from_settings_pages_in_the_background(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                               caplog: pytest.LogCaptureFixture) -> None:
    alerting = Alerting.from_settings(settings(pagerduty.url), sessions, client_url="https://txnwatch.example")
    alerting.start()
    with caplog.at_level(logging.DEBUG):
        try:
            now = datetime.now(timezone.utc)
            assert alerting.evaluate("prod", [hanging()], now).fired == [hanging().incident_key]
            wait_for(lambda: pagerduty.accepted)
            alerting.evaluate("prod", [], now)
            wait_for(lambda: len(pagerduty.accepted) == 2)
        finally:
            alerting.stop(deadline_seconds=5)
    assert [a for a, _ in pagerduty.actions()] == ["trigger", "resolve"]
    assert pagerduty.accepted[0]["client_url"] == "https://txnwatch.example"
    assert ROUTING_KEY not in caplog.text


def test_disabled_pagerduty_tracks_alerts_without_outbox(sessions: sessionmaker[Session]) -> None:
    alerting = Alerting.from_settings(Settings(alert_rules={"hanging_transaction": {"for_seconds": 0}}), sessions)
    assert alerting.evaluate("prod", [hanging()], at(0)).fired
    assert outbox(sessions) == []


def test_channels_share_the_outbox_and_fail_independently(sessions: sessionmaker[Session],
                                                          pagerduty: FakePagerDuty) -> None:
    slack = WebhookNotifier.slack(SecretStr(pagerduty.base + "/hooks/slack/T000/SECRET"))
    hook = WebhookNotifier(SecretStr(pagerduty.base + "/hooks/generic"))
    alerting = Alerting.from_settings(settings(pagerduty.url), sessions, extra_notifiers={SLACK: slack, WEBHOOK: hook})
    alerting.evaluate("prod", [hanging()], at(0))
    alerting.evaluate("prod", [], at(1))
    assert sorted(e.channel for e in outbox(sessions)) == ["pagerduty"] * 2 + ["slack"] * 2 + ["webhook"] * 2
    pagerduty.fail_next(500, 1)  # whichever goes first retries; the others are not held up
    stats = alerting.dispatcher.run_once(at(1))
    assert stats.retried == 1 and stats.sent == 4
    alerting.dispatcher.run_once(at(60))
    assert all(e.status == "sent" for e in outbox(sessions))
    paths = [p for p, _ in pagerduty.hooks]
    assert sorted(set(paths)) == ["/hooks/generic", "/hooks/slack/T000/SECRET"]
    generic = [b for p, b in pagerduty.hooks if p == "/hooks/generic"]
    assert [b["event_action"] for b in generic] == ["trigger", "resolve"]
    assert generic[0]["alert"]["details"]["producer_id"] == 4001
    slack_texts = [b["text"] for p, b in pagerduty.hooks if p.startswith("/hooks/slack")]
    assert slack_texts[0].startswith(":rotating_light: [CRITICAL]") and slack_texts[1].startswith(":white_check_mark:")
    assert [a for a, _ in pagerduty.actions()] == ["trigger", "resolve"]
    alerting.stop(deadline_seconds=1)


def test_webhook_4xx_is_final_and_url_is_not_logged(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    url = pagerduty.base + "/nowhere/SECRET-TOKEN"  # 404
    alerting = Alerting.from_settings(Settings(alert_rules={"hanging_transaction": {"for_seconds": 0}}), sessions,
                                      extra_notifiers={WEBHOOK: WebhookNotifier(SecretStr(url))})
    alerting.evaluate("prod", [hanging()], at(0))
    with caplog.at_level(logging.INFO):
        assert alerting.dispatcher.run_once(at(0)).failed == 1
    assert "SECRET-TOKEN" not in caplog.text
    assert isinstance(alerting.dispatcher, OutboxDispatcher)
