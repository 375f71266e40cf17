"""Security headers and a streaming request size limit on every response, as plain ASGI.

Starlette's ``@app.middleware("http")`` runs each request through a task group and
a re-streamed body; on 100-item list pages that wrapper cost more CPU than the
headers are worth, so this one only edits the response start message.

The body limit counts the bytes actually received, not the ``Content-Length`` a client
claims: a chunked upload has no length, and an app that reads the body to parse it (or a
route whose dependencies read it before checking a token) would otherwise hold all of it
in memory.  The middleware reads the body itself, at most ``MAX_BODY_BYTES`` of it, before
any route, dependency or token check runs, and answers 413 the moment the count passes the
limit; the bytes a client keeps sending after that are dropped by the server unread.  The
app then gets the (small) body replayed, so nothing downstream changes.
"""

from __future__ import annotations

import json

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from txnwatch.serve.security_headers import SECURITY_HEADERS

MAX_BODY_BYTES = 64 * 1024  # the API takes small JSON bodies only


class SecurityHeaders:
    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
            await self._too_large(send_with_headers)
            return
        messages = await self._read_body(receive)
        if messages is None:
            await self._too_large(send_with_headers)
            return
        await self.app(scope, _replay(messages, receive), send_with_headers)

    async def _read_body(self, receive: Receive) -> list[Message] | None:
        """The request's body messages, or None as soon as they pass the limit (the rest is never read)."""
        messages: list[Message] = []
        received = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages  # http.disconnect: let the app see it
            received += len(message.get("body", b""))
            if received > self.max_body_bytes:
                return None
            if not message.get("more_body", False):
                return messages

    async def _too_large(self, send: Send) -> None:
        body = json.dumps({"detail": f"request body larger than {self.max_body_bytes} bytes"}).encode()
        await send({"type": "http.response.start", "status": 413, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


def _replay(messages: list[Message], receive: Receive) -> Receive:
    """Hands the app the body already read, then the server's own receive (for a later disconnect)."""
    pending = list(messages)

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
