"""Tenant strings in notifications (issue 23, item 6): every channel escapes for its markup and stays in its limits.

The ids are what a tenant can create: Kafka accepts any string up to 32,767 bytes as a transactional
id.  End to end, the condition comes from a finding through ConditionBuilder, the alert through the
evaluator and the outbox, and each channel posts to the local server, which answers as PagerDuty's
Events API v2 does (400 for a summary past 1,024 characters, a dedup_key past 255, an event past 512 KB).
"""

from __future__ import annotations

import json
import logging
import math
import re
from datetime import datetime, timezone
from typing import Any

import pytest
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import EVENT_MAX_BYTES, FakePagerDuty, validate
from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import ROUTING_KEY, alerts, at, outbox
from txnwatch.alerting import Alerting
from txnwatch.alerting.channel_text import SLACK_SECTION_MAX, bounded_json, slack_escape
from txnwatch.alerting.conditions import INCIDENT_KEY_MAX, transaction_incident_key
from txnwatch.alerting.from_findings import ConditionBuilder
from txnwatch.alerting.pagerduty import pagerduty_event
from txnwatch.alerting.webhook import SLACK, WEBHOOK, WebhookNotifier, slack_body, webhook_body
from txnwatch.core import logs
from txnwatch.core.config import Settings
from txnwatch.core.findings import Findings, OverdueTransaction
from txnwatch.core.model import TopicPartition, TxnState
from txnwatch.store import models as m

PHISH = "<!channel> <https://evil.example|sign in again>"
FORGED_LINE = "x\n*severity*: `resolved` @here & <@U024BE7LH>"
KAFKA_ID_MAX = 32_767


def overdue(transactional_id: str, partitions: int = 3, topic: str = "orders") -> Findings:
    tps = frozenset(TopicPartition(topic, p) for p in range(partitions))
    return Findings("prod", 0, overdue=(OverdueTransaction("prod", transactional_id, 4001, 2, TxnState.ONGOING,
                                                           0, 60_000, 900_000, tps),))


def deliver(sessions: sessionmaker[Session], pagerduty: FakePagerDuty, findings: Findings) -> Alerting:
    slack = WebhookNotifier.slack(SecretStr(pagerduty.base + "/hooks/slack/T0/SECRET"))
    hook = WebhookNotifier(SecretStr(pagerduty.base + "/hooks/generic"))
    settings = Settings(pagerduty={"enabled": True, "routing_key": ROUTING_KEY, "events_url": pagerduty.url},
                        alert_rules={"transaction_timeout_exceeded": {"for_seconds": 0}})
    alerting = Alerting.from_settings(settings, sessions, extra_notifiers={SLACK: slack, WEBHOOK: hook})
    conditions = ConditionBuilder("prod", "broker-1:9092").build(findings, None, 0)
    alerting.evaluate("prod", conditions, at(0))
    alerting.dispatcher.run_once(at(0))
    return alerting


def slack_posts(pagerduty: FakePagerDuty) -> list[dict[str, Any]]:
    return [body for path, body in pagerduty.hooks if path.startswith("/hooks/slack")]


def mrkdwn_texts(body: dict[str, Any]) -> list[str]:
    return [body["text"], *(block["text"]["text"] for block in body.get("blocks", ()))]


def test_slack_message_cannot_ping_or_link(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    alerting = deliver(sessions, pagerduty, overdue(f"{PHISH} {FORGED_LINE}"))
    try:
        (post,) = slack_posts(pagerduty)
        texts = mrkdwn_texts(post)
        for text in texts:
            # Slack parses links, user/channel mentions and specials only between < and >.
            assert "<" not in text and ">" not in text, text
            assert "@here" not in text  # a word joiner follows the @
        assert "&lt;!channel&gt; &lt;https://evil.example|sign in again&gt;" in post["text"]
        # The forged newline stays on the id's own line: no "*severity*" line of its own.
        assert not any(line.startswith("*severity*") for text in texts for line in text.split("\n"))
        # A backtick in the id cannot close the code span it is shown in.
        (id_line,) = [line for line in texts[-1].split("\n") if line.startswith("*transactional_id*")]
        assert id_line.count("`") == 2
        assert all(e.status == "sent" for e in outbox(sessions))
    finally:
        alerting.stop(deadline_seconds=1)


def test_huge_transaction_pages_on_every_channel(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    """A long id and 3,000 partitions with 249-character topic names (Kafka's longest): every channel delivers.

    Before the bound, the page's custom_details listed every partition (~750 KB): PagerDuty answers 400
    to an event past 512 KB, and a 400 is never retried, so the page was lost.  (The id is 600
    characters here: the alert row itself bounds incident keys, which is the store's business.)
    """
    alerting = deliver(sessions, pagerduty, overdue("t" * 600, partitions=3_000, topic="p" * 249))
    try:
        assert pagerduty.too_large == 0
        (event,) = pagerduty.accepted
        assert len(event["payload"]["summary"]) <= 1024 and len(event["dedup_key"]) <= 255
        details = event["payload"]["custom_details"]
        assert details["transactional_id"] == "t" * 600
        assert details["partitions"][-1] == "… 2900 more"  # the list says how much was left out
        (post,) = slack_posts(pagerduty)
        assert all(len(text) <= SLACK_SECTION_MAX for text in mrkdwn_texts(post))
        (raw,) = [r for r in pagerduty.raw_hooks if b'"event_action"' in r]
        assert len(raw) <= EVENT_MAX_BYTES
        assert all(e.status == "sent" for e in outbox(sessions))
    finally:
        alerting.stop(deadline_seconds=1)


def test_longest_kafka_id_becomes_an_alert_and_pages(sessions: sessionmaker[Session],
                                                      pagerduty: FakePagerDuty) -> None:
    """A 32,767-character id: the alert row's key is bounded (PostgreSQL refused the whole evaluation
    before, so no alert of the cluster could change), and every channel delivers."""
    long_id = "t" * KAFKA_ID_MAX
    alerting = deliver(sessions, pagerduty, overdue(long_id))
    try:
        (alert,) = alerts(sessions)
        assert len(alert.incident_key) <= INCIDENT_KEY_MAX and alert.incident_key.endswith("/pid=4001")
        assert alert.details["transactional_id"] == long_id  # the row keeps the whole id
        (page,) = pagerduty.accepted
        assert len(page["payload"]["summary"]) <= 1024 and len(page["dedup_key"]) <= 255
        assert all(e.status == "sent" for e in outbox(sessions))
    finally:
        alerting.stop(deadline_seconds=1)
    other = transaction_incident_key("r", "prod", long_id[:-1] + "u", 4001)
    assert other != alert.incident_key  # same head, different id: a different incident


def test_longest_kafka_id_fits_pagerduty_limits() -> None:
    """Kafka's longest id (32,767 characters), of characters that count twice in UTF-16."""
    for unit in ("t", "\U0001F600"):
        long_id = unit * KAFKA_ID_MAX
        snapshot = {"incident_key": f"transaction_timeout_exceeded/prod/txn={long_id}/pid=1", "rule": "r",
                    "severity": "error", "summary": f"[prod] transaction {long_id} open", "cluster": "prod",
                    "labels": {"cluster": "prod", "topic": long_id}, "details": {"transactional_id": long_id}}
        body = pagerduty_event(snapshot, "trigger", ROUTING_KEY)
        assert validate(body) is None, validate(body)
        assert len(json.dumps(body).encode()) <= EVENT_MAX_BYTES
        assert body["dedup_key"] == pagerduty_event(snapshot, "trigger", ROUTING_KEY)["dedup_key"]  # stable
        assert body["payload"]["custom_details"]["transactional_id"].startswith(unit * 100)


def event(payload: dict[str, Any], action: str = "trigger") -> m.OutboxEvent:
    return m.OutboxEvent(id=9, alert_id=1, channel=WEBHOOK, action=action, dedup_key="k", payload=payload,
                         status="pending", attempts=0, created_at=datetime(2026, 11, 26, tzinfo=timezone.utc))


def strict_json(raw: bytes) -> Any:
    """Parse as a strict receiver does: UTF-8 only, and NaN/Infinity are not JSON."""
    def refuse(name: str) -> None:
        raise ValueError(f"{name} is not JSON")
    return json.loads(raw.decode("utf-8", "strict"), parse_constant=refuse)


@pytest.mark.parametrize("details", [
    pytest.param({"transactional_id": "bad\udcffbytes"}, id="lone-surrogate-from-undecodable-bytes"),
    pytest.param({"lag_seconds": math.nan, "age_seconds": math.inf}, id="nan-and-infinity"),
    pytest.param({"transactional_id": "q\"uote\\back\nslash\u2028"}, id="json-specials-kept-exact"),
])
def test_webhook_body_is_strict_json(details: dict[str, Any]) -> None:
    from txnwatch.alerting.webhook import encode_json

    body = strict_json(encode_json(webhook_body(event({"summary": "s", "details": details}))))
    sent = body["alert"]["details"]
    for key, value in details.items():
        if isinstance(value, float):
            assert sent[key] is None
        elif "\udcff" in value:
            assert sent[key] == "bad\ufffdbytes"
        else:
            assert sent[key] == value  # JSON carries controls escaped: the receiver gets the exact id


def test_webhook_with_surrogate_is_delivered(pagerduty: FakePagerDuty) -> None:
    hook = WebhookNotifier(SecretStr(pagerduty.base + "/hooks/generic"))
    outcome = hook.send(event({"summary": "s", "details": {"transactional_id": "bad\udcffbytes"}}))
    assert outcome.outcome == "sent", outcome.detail
    assert strict_json(pagerduty.raw_hooks[-1])["alert"]["details"]["transactional_id"] == "bad\ufffdbytes"


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param("<!here>", "&lt;!here&gt;", id="special-mention"),
    pytest.param("a & b", "a &amp; b", id="ampersand"),
    pytest.param("@channel hi", "@\u2060channel hi", id="bare-channel"),
    pytest.param("@Everyone", "@\u2060Everyone", id="bare-everyone-any-case"),
    pytest.param("mail@here.example", "mail@\u2060here.example", id="at-here-inside-a-word-is-defused-too"),
    pytest.param("&lt;", "&amp;lt;", id="entity-escaped-not-passed-through"),
])
def test_slack_escape(text: str, expected: str) -> None:
    assert slack_escape(text) == expected


def test_slack_body_resolve_escapes_summary() -> None:
    body = slack_body(event({"summary": PHISH}, action="resolve"))
    assert "<" not in body["text"] and "&lt;!channel&gt;" in body["text"]


def test_bounded_json_counts_what_it_leaves_out() -> None:
    bounded = bounded_json({"ids": [str(i) for i in range(250)], "nested": {"a": {"b": {"c": "deep"}}}},
                           string_max=64, items_max=100, depth=2)
    assert bounded["ids"][:2] == ["0", "1"] and bounded["ids"][-1] == "… 150 more" and len(bounded["ids"]) == 101
    assert isinstance(bounded["nested"]["a"], str)  # past the depth: one bounded string


FORGED_RECORD = "\n2026-01-01 00:00:00,000 CRITICAL txnwatch: all clear\x1b[2K\x1b[1A\r\x1b]0;owned\x07\u2028x"
_RECORD_START = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR)\s+[\w.]+: ")


def test_text_logs_cannot_be_forged_by_an_id(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 38 item 7: the evaluator and the outbox log the incident and dedup keys, which hold the id; with
    ``log_format: text`` every record stays one line and no ESC byte reaches the terminal (JSON escapes both)."""
    logs.configure("INFO", "text")
    try:
        alerting = deliver(sessions, pagerduty, overdue(f"pay{FORGED_RECORD}"))
        try:
            assert all(e.status == "sent" for e in outbox(sessions))
        finally:
            alerting.stop(deadline_seconds=1)
        err = capsys.readouterr().err
    finally:
        logging.getLogger().handlers.clear()
    lines = err.splitlines()
    keyed = [line for line in lines if "pay\\n2026-01-01 00:00:00,000 CRITICAL" in line]
    assert len(keyed) >= 2, err  # the evaluator's "fired" and the outbox's "delivered" lines name the key
    assert all(_RECORD_START.match(line) for line in lines), err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err and "\u2028" not in err
    assert "\\u001b[2K" in keyed[0] and "\\u2028x" in keyed[0]
