"""A local stand-in for events.pagerduty.com: validates Events v2 bodies and records what it accepted.

Paths under /hooks/ act as a plain webhook receiver (Slack or generic).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SEVERITIES = {"critical", "error", "warning", "info"}
EVENT_MAX_BYTES = 512 * 1024  # PagerDuty: "Events API payloads are limited to 512 KB"
ACTIONS = {"trigger", "acknowledge", "resolve"}


@dataclass
class FakePagerDuty:
    url: str = ""
    base: str = ""
    accepted: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0
    failures: list[int] = field(default_factory=list)  # statuses to answer next, one per request
    retry_after: str | None = None  # sent with forced 429s
    delay_seconds: float = 0.0  # before answering, to exercise client timeouts
    hooks: list[tuple[str, Any]] = field(default_factory=list)  # (path, body) of plain webhook posts
    raw_hooks: list[bytes] = field(default_factory=list)  # their bodies as sent
    too_large: int = 0  # events refused for their size
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail_next(self, status: int, times: int) -> None:
        with self.lock:
            self.failures.extend([status] * times)

    def actions(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(e["event_action"], e["dedup_key"]) for e in self.accepted]


def _utf16_len(text: str) -> int:
    """Characters as a JSON service counts them (UTF-16 units): the stricter reading of PagerDuty's limits."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def validate(body: Any) -> str | None:
    """PagerDuty's 400 cases that matter to us."""
    if not isinstance(body, dict):
        return "Event object is invalid"
    if not body.get("routing_key"):
        return "'routing_key' is missing or blank"
    if body.get("event_action") not in ACTIONS:
        return "'event_action' is missing or invalid"
    if body["event_action"] != "trigger":
        return None if body.get("dedup_key") else "'dedup_key' is missing or blank"
    payload = body.get("payload")
    if not isinstance(payload, dict):
        return "'payload' is missing or invalid"
    for name in ("summary", "source", "severity"):
        if not payload.get(name):
            return f"'payload.{name}' is missing or blank"
    if payload["severity"] not in SEVERITIES:
        return "'payload.severity' is invalid"
    if _utf16_len(payload["summary"]) > 1024:
        return "'payload.summary' is too long"
    if _utf16_len(body.get("dedup_key") or "") > 255:
        return "'dedup_key' is too long"
    return None


def _handler(state: FakePagerDuty) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            if state.delay_seconds:
                time.sleep(state.delay_seconds)
            self.send_response(status)
            if status == 429 and state.retry_after:
                self.send_header("Retry-After", state.retry_after)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with state.lock:
                state.requests += 1
                forced = state.failures.pop(0) if state.failures else None
            if forced is not None:
                return self._answer(forced, {"status": "throttled" if forced == 429 else "error"})
            if self.path.startswith("/hooks/"):
                with state.lock:
                    state.raw_hooks.append(raw)
                    state.hooks.append((self.path, json.loads(raw)))
                return self._answer(200, {"ok": True})
            if self.path != "/v2/enqueue":
                return self._answer(404, {"status": "not found"})
            if len(raw) > EVENT_MAX_BYTES:
                with state.lock:
                    state.too_large += 1
                return self._answer(400, {"status": "invalid event", "message": "Event object is invalid",
                                          "errors": ["Event is too large"]})
            try:
                body = json.loads(raw)
            except ValueError:
                return self._answer(400, {"status": "invalid event", "message": "Event object is invalid",
                                          "errors": ["invalid JSON"]})
            problem = validate(body)
            if problem:
                return self._answer(400, {"status": "invalid event", "message": "Event object is invalid",
                                          "errors": [problem]})
            with state.lock:
                state.accepted.append(body)
            self._answer(202, {"status": "success", "message": "Event processed", "dedup_key": body.get("dedup_key")})

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that stopped waiting (the timeout tests) is expected; other handler errors still print."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@contextmanager
def fake_pagerduty() -> Iterator[FakePagerDuty]:
    state = FakePagerDuty()
    server = _Server(("127.0.0.1", 0), _handler(state))
    state.base = f"http://127.0.0.1:{server.server_address[1]}"
    state.url = state.base + "/v2/enqueue"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
