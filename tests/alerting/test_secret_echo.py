"""Secrets are scrubbed in every form they come back in (issue 38 item 6).

A Slack receiver (or a proxy's error page) that answers 500 quoting the request path put the webhook's
credential in the log and in ``outbox.last_error``: only the exact full URL string was scrubbed.  Here a
local receiver answers every post with 500 and a body that quotes what it was sent (the path, the query,
percent-encoded once and twice, JSON-escaped with ``\\/``, ``\\u`` escapes, the path's parts one by one, the
routing key PagerDuty was sent); after the delivery attempts nothing of either secret is in any log line
(text and JSON formats) or any stored ``last_error``, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import quote

import pytest
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fixtures import sessions  # noqa: F401  (fixture)
from tests.alerting.helpers import at, outbox
from tests.alerting.test_hostile_ids import overdue
from tests.fixtures.http_stub import serving
from txnwatch.alerting import Alerting
from txnwatch.alerting.from_findings import ConditionBuilder
from txnwatch.alerting.webhook import SLACK, WEBHOOK, WebhookNotifier
from txnwatch.core import logs, redact
from txnwatch.core.config import Settings

TEAM, CHANNEL, TOKEN = "T0ECHO1234", "B0ECHO5678", "xK9echoSecretToken0000abcd"
QUERY_TOKEN = "qTok3nValue99"
ROUTING_KEY = "R0UT1NGKEYecho0123456789abcdef01"
SECRETS = (TEAM, CHANNEL, TOKEN, QUERY_TOKEN, ROUTING_KEY)


def echoes(path: str, body: bytes) -> str:
    """What a hostile or careless receiver may say back about a request."""
    only_path, _, query = path.partition("?")
    parts = [p for p in only_path.split("/") if p]
    sent = body.decode("utf-8", "replace")
    return "\n".join([
        f"no_service: {path}",
        f"path={quote(path, safe='')} twice={quote(quote(path, safe=''), safe='')}",
        json.dumps({"error": "invalid_token", "path": only_path}).replace("/", "\\/"),
        json.dumps({"path": only_path}, ensure_ascii=True).replace(parts[-1][:4], "".join(
            f"\\u{ord(c):04x}" for c in parts[-1][:4])),
        f"query={query} parts={' '.join(parts)} last={parts[-1].lower()}{parts[-1][len(parts[-1].lower()):]}",
        f"you sent: {sent[:2000]}",
    ])


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        answer = echoes(self.path, body).encode()
        self.send_response(500)
        self.send_header("content-type", "text/plain")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[str]:
    with serving(_Echo) as url:
        yield url


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_an_echoing_receiver_never_gets_a_secret_logged_or_stored(
        sessions: sessionmaker[Session], receiver: str, log_format: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    slack_url = f"{receiver}/services/{TEAM}/{CHANNEL}/{TOKEN}?token={QUERY_TOKEN}&x=1"
    hook_url = f"{receiver}/hooks/generic/{TOKEN}"
    settings = Settings(pagerduty={"enabled": True, "routing_key": ROUTING_KEY, "events_url": f"{receiver}/v2/enqueue"},
                        alert_rules={"transaction_timeout_exceeded": {"for_seconds": 0}})
    logs.configure("INFO", log_format)
    try:
        alerting = Alerting.from_settings(settings, sessions, extra_notifiers={
            SLACK: WebhookNotifier.slack(SecretStr(slack_url)), WEBHOOK: WebhookNotifier(SecretStr(hook_url))})
        try:
            alerting.evaluate("prod", ConditionBuilder("prod", "broker-1:9092").build(overdue("pay-1"), None, 0), at(0))
            alerting.dispatcher.run_once(at(0))
        finally:
            alerting.stop(deadline_seconds=1)
        err = capsys.readouterr().err
    finally:
        logging.getLogger().handlers.clear()
    rows = outbox(sessions)
    assert {row.channel for row in rows} == {"pagerduty", SLACK, WEBHOOK}
    stored = [row.last_error or "" for row in rows]
    assert all(error.startswith("HTTP 500: ") for error in stored), stored
    assert "not delivered" in err  # the attempts were logged, with their detail
    for text in [err, *stored]:
        lowered = text.lower()
        for secret in SECRETS:
            assert secret.lower() not in lowered, (secret, text)
            assert quote(secret[:6], safe="").lower() not in lowered
    assert "no_service: ***" in stored[[r.channel for r in rows].index(SLACK)]


@pytest.mark.parametrize(("text", "expected"), [
    pytest.param(f"/services/{TEAM}/{CHANNEL}/{TOKEN}", "***", id="the-path"),
    pytest.param(quote(f"/services/{TEAM}/{CHANNEL}/{TOKEN}", safe=""), "***", id="percent-encoded"),
    pytest.param(quote(f"/services/{TEAM}/{CHANNEL}/{TOKEN}", safe="").lower(), "***", id="percent-lower-hex"),
    pytest.param(quote(quote(f"/x/{TOKEN}", safe=""), safe=""), "%252Fx***", id="double-encoded"),
    pytest.param(json.dumps(f"/services/{TEAM}/{CHANNEL}/{TOKEN}").replace("/", "\\/"), '"***"', id="json-slashes"),
    pytest.param("".join(f"\\u{ord(c):04X}" for c in TOKEN), "***", id="json-unicode-escapes"),
    pytest.param(f"team {TEAM} channel {CHANNEL}", "team *** channel ***", id="the-ids-alone"),
    pytest.param(f"token={QUERY_TOKEN}&x=1", "***", id="the-query"),
    pytest.param(f"?token={QUERY_TOKEN}", "?token=***", id="a-query-value"),
    pytest.param("harmless services text x=1", "harmless services text x=1", id="words-stay"),
])
def test_every_spelling_of_a_webhook_url_part_is_masked(text: str, expected: str) -> None:
    secret = redact.Secret.url(f"https://hooks.slack.com/services/{TEAM}/{CHANNEL}/{TOKEN}?token={QUERY_TOKEN}&x=1")
    assert secret.scrub(text) == expected


def test_process_wide_masking_keeps_to_token_like_parts() -> None:
    """What every log line and API body is scrubbed of once a notifier holds the URL: not an everyday word."""
    everywhere = redact.Secret.url("https://example.com/hooks/generic", answers=False)
    assert everywhere.scrub("POST /hooks/generic to generic failed") == "POST /hooks/generic to generic failed"
    assert everywhere.scrub("to https://example.com/hooks/generic") == "to <webhook url>"
    slack = redact.Secret.url(f"https://hooks.slack.com/services/{TEAM}/{CHANNEL}/{TOKEN}", answers=False)
    assert slack.scrub(f"no_service: /services/{TEAM}/{CHANNEL}/{TOKEN}") == "no_service: ***"
    assert slack.scrub("services") == "services"
