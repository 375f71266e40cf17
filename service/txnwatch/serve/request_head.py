"""A request head's budget: its bytes, its header fields and its URL, refused before they are buffered (issue 38).

Why: uvicorn's httptools protocol keeps every header line it is sent and grows the URL without a bound (h11 at
least stops at its ``max_incomplete_event_size``).  Four connections sending ``GET /healthz HTTP/1.1`` and then
``a:b\\r\\n`` lines for nine seconds, inside the read deadline, took the daemon from 82 to 844 MB.

What an HTTP server in front of a network does, and what this does on every serving process (the daemon's,
each API worker's; the metrics port's process has its own copy in ``serve/metrics_port.py``):

* the head (request line and header fields) must end within ``max_head_bytes`` (nginx's
  ``large_client_header_buffers``, Go's ``MaxHeaderBytes``): else ``431 Request Header Fields Too Large``;
* at most ``max_header_fields`` fields (Apache's ``LimitRequestFields``, 100 there too): else ``431``;
* a URL of at most ``max_url_bytes`` (Apache's ``LimitRequestLine``, nginx's 8 KiB buffer): else
  ``414 URI Too Long``;

and the connection is closed after the answer.  The bytes are counted as they are handed to httptools: the parser
is fed at most what is left of the budget, so what it and uvicorn hold for one connection's head (the URL, the
header list, a field still arriving) is bounded by ``max_head_bytes`` whatever the client sends; a piece in which
a pipelined request begins is charged to that request whole, so its head may be refused up to ``STEP_BYTES``
early.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

#: Defaults of the ``api.max_request_*`` settings: what a browser, curl or a Prometheus scraper sends is well
#: below (a console request with its session cookie is ~1 KiB, a few dozen fields at most).
MAX_HEAD_BYTES = 16 * 1024
MAX_HEADER_FIELDS = 100
MAX_URL_BYTES = 8 * 1024

#: The parser is fed at most this much at a time (uvicorn reads up to 256 KiB at once): the precision of the count.
STEP_BYTES = 1024

_REASONS = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


@dataclass(frozen=True)
class HeadLimits:
    max_head_bytes: int = MAX_HEAD_BYTES
    max_header_fields: int = MAX_HEADER_FIELDS
    max_url_bytes: int = MAX_URL_BYTES


def refusal(status: int, message: str) -> bytes:
    """The whole answer to a refused head: nothing of the request is read further, the connection closes."""
    body = (message + "\n").encode("ascii")
    return (b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
            b"connection: close\r\n\r\n%s" % (status, _REASONS[status], len(body), body))


def budgeted(base: type[asyncio.Protocol], limits: HeadLimits, refused: Any) -> type[asyncio.Protocol]:
    """A subclass of uvicorn's ``HttpToolsProtocol`` ``base`` that refuses heads over ``limits``.

    ``refused(kind)`` is told of each refusal (the guard's rate-limited log).  It relies on uvicorn's httptools
    protocol calling the parser from ``data_received`` and on httptools' callbacks (``on_message_begin``,
    ``on_url``, ``on_header``, ``on_headers_complete``, ``on_body``, ``on_message_complete``), looked up on the
    protocol object when the parser is made; tests/test_request_head.py pins both."""
    head_bytes, fields, url_bytes = limits.max_head_bytes, limits.max_header_fields, limits.max_url_bytes

    class Budgeted(base):  # type: ignore[valid-type,misc]  # a class built at run time over uvicorn's protocol
        _in_head = False  # a message began and its head is not complete
        _in_body = False  # its head is complete, its body not (yet)
        _began = False  # a message began during the piece being fed
        _head_used = 0
        _fields = 0
        _url_used = 0
        _refused: tuple[int, str] | None = None

        def data_received(self, data: bytes) -> None:
            view = memoryview(data)
            while view and self._refused is None and not self.transport.is_closing():
                # A head gets at most what is left of its budget, in steps: a piece in which a message begins is
                # charged to it whole, so a pipelined request is charged at most a step more than its own bytes.
                size = STEP_BYTES if self._in_body else min(STEP_BYTES, head_bytes - self._head_used)
                piece, view = view[:size], view[size:]
                self._began = False
                super().data_received(data if len(piece) == len(data) else bytes(piece))
                if self._in_head:
                    self._head_used = len(piece) if self._began else self._head_used + len(piece)
                    if self._head_used >= head_bytes and self._refused is None:
                        self._refuse(431, f"request head above {head_bytes} bytes")
                else:
                    self._head_used = 0
            if self._refused is not None and not self.transport.is_closing():
                status, message = self._refused
                self.transport.write(refusal(status, message))
                self.transport.close()

        def _refuse(self, status: int, message: str) -> None:
            self._refused = (status, message)
            refused(f"refused {status} ({message.split(' above')[0]})")

        def on_message_begin(self) -> None:
            self._in_head, self._in_body, self._began = True, False, True
            self._fields = self._url_used = 0
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            if self._refused is not None:
                return
            self._url_used += len(url)
            if self._url_used > url_bytes:
                self._refuse(414, f"URL above {url_bytes} bytes")
                return
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            if self._refused is not None:
                return
            self._fields += 1
            if self._fields > fields:
                self._refuse(431, f"request header fields above {fields}")
                return
            super().on_header(name, value)

        def on_headers_complete(self) -> None:
            self._in_head, self._in_body = False, True
            if self._refused is None:  # a refused head never reaches the application
                super().on_headers_complete()

        def on_body(self, body: bytes) -> None:
            if self._refused is None:
                super().on_body(body)

        def on_message_complete(self) -> None:
            self._in_head = self._in_body = False
            if self._refused is None:
                super().on_message_complete()

    Budgeted.__name__ = Budgeted.__qualname__ = f"Budgeted{base.__name__}"
    return Budgeted
