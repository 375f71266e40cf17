"""PagerDuty Events API v2: the event body (a pure function of an outbox snapshot) and its delivery.

Tenant strings in the event are bounded to PagerDuty's documented limits (summary 1,024 characters,
dedup_key 255, the event 512 KB): see :mod:`txnwatch.alerting.channel_text`.

The routing key is added only when sending, so it is never stored in the outbox
and never appears in logs; response bodies are scrubbed of it before logging.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from txnwatch.alerting.channel_text import PAGERDUTY_FIELD_MAX, PAGERDUTY_SUMMARY_MAX, fit_utf16, pagerduty_details
from txnwatch.alerting.outbox import Delivery
from txnwatch.alerting.snapshot import dedup_key
from txnwatch.core import redact
from txnwatch.core.config import PagerDutyConfig
from txnwatch.core.vocabulary import Severity
from txnwatch.store import models as m

if TYPE_CHECKING:  # httpx is imported when a notifier is built (docs/performance.md: idle RSS)
    import httpx

SUMMARY_MAX = PAGERDUTY_SUMMARY_MAX
SEVERITIES = tuple(s.value for s in Severity)
CLIENT = "txnwatch"
BODY_LOG_MAX = 500
#: How much of an answer is read for its detail: scrubbed whole, then cut to BODY_LOG_MAX.
BODY_READ_MAX = 65_536


# The project's runbooks, rendered by the git host: the absolute link a page carries when nothing closer to
# the operator (console.runbook_url, or the console's copy under public_url) is configured.
DEFAULT_RUNBOOK_URL = "https://github.com/txnwatch/txnwatch/blob/main/docs/runbooks.md"


@dataclass(frozen=True)
class EventContext:
    """What the event needs besides the alert; from PagerDutyConfig and the public URL.

    ``client_url``: where on-call opens txnwatch (``public_url``); never the listen address, which
    in Kubernetes is ``0.0.0.0``.  ``runbook_doc_url``: the runbooks document a relative
    ``docs/runbooks.md#section`` resolves to, so every page links an absolute URL (PagerDuty drops
    relative links).  ``runbook_base_url`` (older): a base the relative path is appended to.
    """

    source: str = "txnwatch"
    client_url: str | None = None
    runbook_base_url: str | None = None
    runbook_doc_url: str = DEFAULT_RUNBOOK_URL


def pagerduty_event(snapshot: Mapping[str, Any], action: str, routing_key: str,
                    context: EventContext = EventContext()) -> dict[str, Any]:
    """Events API v2 body; a resolve carries only what PagerDuty reads from it (routing key, action, dedup key)."""
    body: dict[str, Any] = {
        "routing_key": routing_key,
        "event_action": action,
        "dedup_key": dedup_key(str(snapshot["incident_key"])),
    }
    if action != "trigger":
        return body
    details = dict(snapshot.get("details") or {})
    labels = dict(snapshot.get("labels") or {})
    cluster = snapshot.get("cluster") or labels.get("cluster") or "unknown"
    severity = snapshot.get("severity")
    payload: dict[str, Any] = {
        "summary": fit_utf16(str(snapshot.get("summary") or snapshot["incident_key"]), SUMMARY_MAX),
        "source": fit_utf16(f"{context.source}/{cluster}", PAGERDUTY_FIELD_MAX),
        "severity": severity if severity in SEVERITIES else "critical",
        "component": fit_utf16(str(labels.get("topic") or cluster), PAGERDUTY_FIELD_MAX),
        "group": fit_utf16(str(cluster), PAGERDUTY_FIELD_MAX),
        "class": fit_utf16(str(snapshot["rule"]), PAGERDUTY_FIELD_MAX),
        "custom_details": pagerduty_details({**details, "labels": labels, "incident_key": snapshot["incident_key"],
                                             "started_at": snapshot.get("started_at")}),
    }
    if snapshot.get("fired_at"):
        payload["timestamp"] = snapshot["fired_at"]
    body["payload"] = payload
    body["client"] = CLIENT
    if context.client_url:
        body["client_url"] = context.client_url
    runbook = details.get("runbook")
    if isinstance(runbook, str):
        href = runbook_href(runbook, context)
        if "://" in href:  # PagerDuty drops relative links
            body["links"] = [{"href": href, "text": f"Runbook: {snapshot['rule']}"}]
            payload["custom_details"]["runbook_url"] = href
    return body


def runbook_href(runbook: str, context: EventContext) -> str:
    """An absolute runbook URL for a detail's ``docs/runbooks.md#section`` (or an absolute one as is)."""
    if "://" in runbook:
        return runbook
    if context.runbook_base_url:
        return context.runbook_base_url.rstrip("/") + "/" + runbook
    _, _, anchor = runbook.partition("#")
    return context.runbook_doc_url + (f"#{anchor}" if anchor else "")


class PagerDutyNotifier:
    """Sends outbox rows of the ``pagerduty`` channel; 202 is the only success, 429/5xx/network errors retry."""

    def __init__(self, routing_key: SecretStr, *, events_url: str = "https://events.pagerduty.com/v2/enqueue",
                 timeout_seconds: float = 10.0, context: EventContext = EventContext(),
                 client: httpx.Client | None = None) -> None:
        self._routing_key = routing_key
        self._secret = redact.Secret.token(routing_key.get_secret_value(), "**********")
        redact.register(self._secret)
        self._url = events_url
        self._timeout = timeout_seconds
        self._context = context
        if client is None:
            import httpx  # a daemon that pages nobody never loads it (~4.5 MB resident; issue 25)

            client = httpx.Client()
        self._client = client

    @classmethod
    def from_config(cls, config: PagerDutyConfig, client_url: str | None = None,
                    runbook_base_url: str | None = None,
                    runbook_doc_url: str = DEFAULT_RUNBOOK_URL) -> PagerDutyNotifier:
        if config.routing_key is None:
            raise ValueError("PagerDuty needs a routing key")
        return cls(config.routing_key, events_url=config.events_url, timeout_seconds=config.timeout_seconds,
                   context=EventContext(config.source, client_url, runbook_base_url, runbook_doc_url))

    def close(self) -> None:
        self._client.close()

    def send(self, event: m.OutboxEvent, timeout_seconds: float | None = None) -> Delivery:
        body = pagerduty_event(event.payload, event.action, self._routing_key.get_secret_value(), self._context)
        timeout = self._timeout if timeout_seconds is None else max(0.1, min(self._timeout, timeout_seconds))
        import httpx  # loaded by __init__ already

        try:
            response = self._client.post(self._url, json=body, timeout=timeout)
        except httpx.TimeoutException as exc:
            return Delivery("retry", f"timeout after {timeout:.1f}s: {type(exc).__name__}")
        except httpx.HTTPError as exc:
            return Delivery("retry", self._scrub(f"network error: {type(exc).__name__}: {exc}"))
        return classify(response.status_code, self._scrub(response.text[:BODY_READ_MAX])[:BODY_LOG_MAX],
                        response.headers.get("retry-after"))

    def _scrub(self, text: str) -> str:
        """The routing key in every spelling (percent-encoded, JSON-escaped: txnwatch.core.redact.Secret)."""
        return self._secret.scrub(text)


def classify(status: int, body: str, retry_after: str | None = None) -> Delivery:
    """PagerDuty's contract: 202 accepted; 400 is our bug (retrying cannot help); 429 and 5xx are theirs."""
    if status == 202:
        return Delivery("sent", f"HTTP {status}")
    detail = f"HTTP {status}: {body}"
    if status == 429 or status >= 500 or status == 408:
        return Delivery("retry", detail, _seconds(retry_after))
    return Delivery("failed", detail)


def _seconds(header: str | None) -> float | None:
    try:
        return max(0.0, float(header)) if header else None
    except ValueError:
        return None
