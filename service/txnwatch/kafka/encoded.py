"""Requests whose encoded bodies are kept from one poll to the next (issue 25).

While leaders stay put, a poll asks every leader the same ListOffsets (three) and DescribeProducers
questions about the same partitions.  Building and encoding those requests afresh cost ~20 ms of the
admin IO thread a poll on a 2,000-partition cluster, for bytes that did not change.

kafka-python's request classes take no extra attributes (``__slots__``) and cannot be subclassed (its
metaclass looks for a JSON schema under the subclass's name), so the kept bytes travel in a stand-in,
:class:`EncodedRequest`.  It offers exactly what kafka-python's connection uses when it sends a request
(``kafka/net/connection.py`` ``_send_request`` and ``kafka/protocol/parser.py`` ``send_request``, 3.0.x):
the version the connection negotiates (``BrokerVersionData.api_version`` reads the class's name, API key,
version range and the request's own bounds) and stamps on it, the header it sets with a fresh correlation
id at every send, ``encode(framed=True, header=True)``, ``expect_response()`` and ``header``.  Only the
body, everything after the request header, is kept, once per API version; the header is still encoded by
kafka-python at each send, so correlation ids, client id and flexible headers are as before.

``tests/kafka/test_encoded.py`` is the canary: it fails if kafka-python's own encoding of the same request,
header included, differs from the stand-in's bytes at any version, or if its version negotiation answers
differently.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Hashable
from typing import Any

from kafka.protocol.api_header import RequestHeader

Build = Callable[[], Any]
_FRAME = struct.Struct(">i")


class EncodedBody:
    """One question's request, encoded once per API version; shared by the stand-ins of every poll that asks it."""

    __slots__ = ("_by_version", "build", "expects_response", "max_version", "min_version", "request_class")

    def __init__(self, build: Build) -> None:
        self.build = build
        prototype = build()
        self.request_class: Any = type(prototype)
        # The request's own version bounds (min_version=/max_version= at construction), read back so that the
        # builder stays their one source.
        self.min_version: int | None = prototype._min_version
        self.max_version: int | None = prototype._max_version
        self.expects_response: bool = prototype.expect_response()
        self._by_version: dict[int, bytes] = {}

    def at(self, version: int) -> bytes:
        """The body (no frame, no header) as kafka-python encodes it at ``version``."""
        body = self._by_version.get(version)
        if body is None:
            body = self._by_version[version] = bytes(self.build().encode(version=version))
        return body


class EncodedRequest:
    """Stands in for one kafka-python request at one send; a fresh one per call, as kafka-python stamps the
    negotiated version on it.  Reading any request field (tests, debug logs) builds the real request."""

    __slots__ = ("_body", "_header", "_version")

    def __init__(self, body: EncodedBody) -> None:
        self._body = body
        self._version: int | None = None
        self._header: Any = None

    # What BrokerVersionData.api_version reads to negotiate the version.
    @property
    def name(self) -> str:
        return str(self._body.request_class.name)

    @property
    def API_KEY(self) -> int:
        return int(self._body.request_class.API_KEY)

    @property
    def min_version(self) -> int:
        return int(self._body.request_class.min_version)

    @property
    def max_version(self) -> int:
        return int(self._body.request_class.max_version)

    @property
    def _min_version(self) -> int | None:
        return self._body.min_version

    @property
    def _max_version(self) -> int | None:
        return self._body.max_version

    @property
    def API_VERSION(self) -> int | None:
        return self._version

    @API_VERSION.setter
    def API_VERSION(self, version: int) -> None:
        if not 0 <= version <= self.max_version:
            raise ValueError(f"Invalid version {version} (max version is {self.max_version}).")
        self._version = version
        if self._header is not None:
            self._header.request_api_version = version

    @property
    def header(self) -> Any:
        return self._header

    def is_request(self) -> bool:
        return True

    def expect_response(self) -> bool:
        return self._body.expects_response

    def with_header(self, correlation_id: int = 0, client_id: str = "kafka-python") -> None:
        self._header = RequestHeader(request_api_key=self.API_KEY, request_api_version=self._version,
                                     correlation_id=correlation_id, client_id=client_id)

    def encode(self, version: int | None = None, header: bool = False, framed: bool = False) -> bytes:
        if version is not None:
            self.API_VERSION = version
        if self._version is None:
            raise ValueError("Version required to encode data")
        if header and self._header is None:
            raise ValueError("No header found")
        payload = self._body.at(self._version)
        if header:
            flexible = self._body.request_class.flexible_version_q(self._version)
            payload = bytes(self._header.encode(flexible=flexible)) + payload
        return _FRAME.pack(len(payload)) + payload if framed else payload

    def __getattr__(self, name: str) -> Any:
        # Only names outside the stand-in's own get here: the request's fields.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._body.build(), name)

    def __repr__(self) -> str:
        return repr(self._body.build())


class RequestMemo:
    """The bodies asked for in the current and the previous poll, by question.

    A question not asked in a whole poll (its leader moved, its topic went) is forgotten at the next, so
    what is kept stays bounded by two polls' requests, a few hundred kB on a 2,000-partition cluster.
    Used on the client's IO thread only, one poll at a time.
    """

    def __init__(self) -> None:
        self._previous: dict[Hashable, EncodedBody] = {}
        self._current: dict[Hashable, EncodedBody] = {}

    def start_poll(self) -> None:
        self._previous, self._current = self._current, {}

    def request(self, key: Hashable, build: Build) -> EncodedRequest:
        """A stand-in for ``build()``; ``key`` must name everything the request carries."""
        body = self._current.get(key)
        if body is None:
            body = self._previous.pop(key, None) or EncodedBody(build)
            self._current[key] = body
        return EncodedRequest(body)

    def __len__(self) -> int:
        return len(self._current)
