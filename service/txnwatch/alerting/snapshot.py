"""The channel-neutral picture of an alert that an outbox row carries.

Frozen at enqueue time: the alert row keeps changing (age, resolve), but a retried
trigger must say what was true when it fired.
"""

from __future__ import annotations

import hashlib
from typing import Any

from txnwatch.alerting.channel_text import json_safe, utf16_len
from txnwatch.store import models as m

DEDUP_KEY_MAX = 255  # PagerDuty's limit


def dedup_key(incident_key: str) -> str:
    """Stable per incident; long keys keep a readable head and a hash tail so they stay unique.

    Counted in UTF-16 units (a character past U+FFFF is two), as a JSON service counts, so an id of
    emoji cannot pass the limit either; lone surrogates (undecodable bytes) are replaced.
    """
    incident_key = json_safe(incident_key)
    if utf16_len(incident_key) <= DEDUP_KEY_MAX:
        return incident_key
    digest = hashlib.sha256(incident_key.encode()).hexdigest()[:32]
    head = incident_key[:DEDUP_KEY_MAX - 33]
    while utf16_len(head) > DEDUP_KEY_MAX - 33:
        head = head[:-1]
    return f"{head}~{digest}"


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def alert_snapshot(alert: m.Alert) -> dict[str, Any]:
    return {
        "alert_id": alert.id,
        "rule": alert.rule,
        "incident_key": alert.incident_key,
        "cluster": (alert.labels or {}).get("cluster"),
        "state": alert.state,
        "severity": alert.severity,
        "summary": alert.summary,
        "labels": dict(alert.labels or {}),
        "details": dict(alert.details or {}),
        "started_at": _iso(alert.started_at),
        "fired_at": _iso(alert.fired_at),
        "resolved_at": _iso(alert.resolved_at),
    }
