"""Generic JSON webhook and Slack incoming-webhook notifiers, sharing the outbox with PagerDuty.

Webhook URLs embed their credential (Slack's do), so like the routing key they are
never logged.  httpx.Client logs every request URL at INFO, hence requests go straight
to a transport here.  What a receiver answers may quote the URL back (a Slack 500 or a proxy's
error page echoes the request path): every answer and error is scrubbed of the URL and of its
parts, in every spelling (txnwatch.core.redact.Secret.url), before it is cut, logged or stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from txnwatch.alerting.channel_text import (
    SLACK_SUMMARY_MAX,
    WEBHOOK_BODY_BUDGET,
    WEBHOOK_STRING_MAX,
    json_safe,
    slack_code,
    slack_lines,
    slack_text,
    within_budget,
)
from txnwatch.alerting.outbox import Delivery
from txnwatch.core import redact
from txnwatch.store import models as m

if TYPE_CHECKING:  # httpx is imported when a notifier is built (docs/performance.md: idle RSS)
    import httpx

WEBHOOK = "webhook"
SLACK = "slack"
BODY_LOG_MAX = 500
#: How much of an answer is read for its detail: scrubbed whole, then cut to BODY_LOG_MAX.
BODY_READ_MAX = 65_536


def webhook_body(event: m.OutboxEvent) -> dict[str, Any]:
    """The outbox snapshot, values exact but bounded (see channel_text), plus what a receiver needs to dedupe
    and order."""
    alert = within_budget(dict(event.payload), WEBHOOK_BODY_BUDGET, string_max=WEBHOOK_STRING_MAX)
    return {"event_action": event.action, "dedup_key": json_safe(event.dedup_key), "event_id": event.id,
            "alert": alert}


def slack_body(event: m.OutboxEvent) -> dict[str, Any]:
    """An incoming-webhook message: every tenant string escaped for mrkdwn and bounded (see channel_text)."""
    snapshot: Mapping[str, Any] = event.payload
    summary = slack_text(snapshot.get("summary") or "", SLACK_SUMMARY_MAX)
    if event.action == "resolve":
        text = f":white_check_mark: RESOLVED {summary}"
    else:
        severity = slack_text(str(snapshot.get("severity", "")).upper(), 20)
        text = f":rotating_light: [{severity}] {summary}"
    details = snapshot.get("details") or {}
    lines = [f"*{slack_text(key, 80)}*: {slack_code(value)}" for key, value in details.items()
             if value not in (None, "")]
    body: dict[str, Any] = {"text": text}
    if lines and event.action != "resolve":
        body["blocks"] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}},
                          {"type": "section", "text": {"type": "mrkdwn", "text": slack_lines(lines)}}]
    return body


def encode_json(body: dict[str, Any]) -> bytes:
    """Strict JSON in UTF-8: ``allow_nan=False`` because NaN is not JSON (the renderers already made it null)."""
    return json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


class WebhookNotifier:
    """Any 2xx is success; 408/429/5xx and network errors retry; other answers are final."""

    def __init__(self, url: SecretStr, *, render: Callable[[m.OutboxEvent], dict[str, Any]] = webhook_body,
                 timeout_seconds: float = 10.0, headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None) -> None:
        self._url = url
        self._secret = redact.Secret.url(url.get_secret_value())
        # Whoever formats text later (a log line, a stored error, an API body) masks it too.
        redact.register(redact.Secret.url(url.get_secret_value(), answers=False))
        self._render = render
        self._timeout = timeout_seconds
        self._headers = dict(headers or {})
        if transport is None:
            import httpx  # a daemon that pages nobody never loads it (~4.5 MB resident; issue 25)

            transport = httpx.HTTPTransport(retries=0)
        self._transport = transport

    @classmethod
    def slack(cls, url: SecretStr, **kwargs: Any) -> WebhookNotifier:
        return cls(url, render=slack_body, **kwargs)

    def close(self) -> None:
        self._transport.close()

    def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery:
        timeout = self._timeout if timeout_seconds is None else max(0.1, min(self._timeout, timeout_seconds))
        import httpx  # loaded by __init__ already, unless a transport was handed in

        try:
            request = httpx.Request("POST", self._url.get_secret_value(), content=encode_json(self._render(event)),
                                    headers={"Content-Type": "application/json", **self._headers}, extensions={"timeout": httpx.Timeout(timeout).as_dict()})
            response = self._transport.handle_request(request)
            try:
                response.read()
            finally:
                response.close()
        except httpx.TimeoutException as exc:
            return Delivery("retry", f"timeout after {timeout:.1f}s: {type(exc).__name__}")
        except httpx.HTTPError as exc:
            return Delivery("retry", self._scrub(f"network error: {type(exc).__name__}: {exc}"))
        status, body = response.status_code, self._scrub(response.text[:BODY_READ_MAX])[:BODY_LOG_MAX]
        if 200 <= status < 300:
            return Delivery("sent", f"HTTP {status}")
        if status in (408, 429) or status >= 500:
            retry_after = response.headers.get("retry-after")
            return Delivery("retry", f"HTTP {status}: {body}",
                            float(retry_after) if retry_after and retry_after.isdigit() else None)
        return Delivery("failed", f"HTTP {status}: {body}")

    def _scrub(self, text: str) -> str:
        return self._secret.scrub(text)
