"""Budgets for what a broker sends, applied before it is buffered or decoded (issue 38).

Why: a "broker" that answered with a size field of 2^31-1 and then streamed zeros took the daemon from 82 MB
to 2.3 GB in 40 s, and every other cluster of the pod with it; a complete, well-formed ListTransactions answer
of 1,500,000 entries took ~1 GB and ~40 s of a core to decode, every poll.  kafka-python trusts both:

* its transports read a socket until it is empty (``_sock_recv``), whatever the frame said, so a sender faster
  than the reader is buffered without limit before the frame's size is even looked at;
* its decoders (code it generates per response and version) allocate as many entries as an array's count says.

What txnwatch does, on every client it creates (the poll's connection manager, ``kafka/connection.py``, and the
transaction-log tail's consumer, ``kafka/txnlog.py``):

* **frames**: each transport reads at most ``READ_BYTES_PER_WAKEUP`` per wake-up and looks at every response
  frame's size field as it arrives: one above ``max_response_bytes`` is refused before its payload is read, the
  connection is closed and the request fails with :class:`FrameRefused`, which names the broker, the size and
  the request it answered;
* **entries**: a response's arrays may hold ``max_response_entries`` entries in all (every array's count, nested
  ones included); the count is checked before the array is decoded, so an absurd one allocates nothing, and
  the connection is closed with :class:`EntriesRefused`.

Each refusal is also a :class:`~txnwatch.core.model.Refusal` in the client's :class:`RefusalLog`, which
``ClusterConnection`` turns into a failed poll (``ResponseRefused``): the cluster is shown down, its
``last_error`` says which broker sent what, ``txnwatch_responses_refused_total`` counts it.

It leans on kafka-python's internals in three places, pinned by tests/kafka/test_bounded.py: the transport's
``_sock``/``_sock_recv``/``_protocol`` and its read loop aborting on the ``err`` ``_sock_recv`` returns; the
connection manager's ``_build_transport``; ``StructField.compiled_decode_from`` returning generated code whose
arrays loop over ``range`` looked up in its globals.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kafka.errors as Errors
from kafka.net.compat import KafkaNetClient
from kafka.net.manager import KafkaConnectionManager
from kafka.net.selector import NetworkSelector
from kafka.protocol.schemas.fields.struct import StructField

from txnwatch.core.model import Refusal

MiB = 1024 * 1024
#: The transaction-log tail asks for up to 16 MiB per fetch plus one partition's 4 MiB (a broker may exceed the
#: fetch's max by the first batch it returns, KIP-74); the poll's own largest ask is 8 MiB of records
#: (``kafka/records.py``).  4 MiB above the tail's 20 MiB is room for the headers and for the Metadata answer
#: of a cluster of ~150,000 partitions (80,000 are 2.1 MB).
MAX_RESPONSE_BYTES = 24 * MiB
#: Entries in all of one answer's arrays.  The Metadata answer of 80,000 partitions at replication factor 3 holds
#: ~560,000 (a partition, its replicas and its in-sync replicas); a decoded entry costs ~30-270 bytes.
MAX_RESPONSE_ENTRIES = 1_000_000
#: What one transport reads per wake-up before the frame sizes in it are looked at.
READ_BYTES_PER_WAKEUP = 256 * 1024
_RECV_BYTES = 64 * 1024
_KEEP_REFUSALS = 20


@dataclass(frozen=True)
class ResponseBounds:
    max_response_bytes: int = MAX_RESPONSE_BYTES
    max_response_entries: int = MAX_RESPONSE_ENTRIES


class FrameRefused(Errors.KafkaConnectionError):  # type: ignore[misc]  # kafka-python is untyped
    """A response frame's size was above ``max_response_bytes``: it was not read, the connection is closed."""


class EntriesRefused(Errors.KafkaProtocolError):  # type: ignore[misc]  # kafka-python is untyped
    """A response held more than ``max_response_entries`` entries: it was not decoded, the connection is closed.

    A KafkaProtocolError, not a ValueError: kafka-python logs the whole buffer of a response that fails to decode
    with a ValueError, and its transport aborts the connection on this class."""


class RefusalLog:
    """The refusals of one client since they were last taken; written by its I/O thread, taken by the poll."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: list[Refusal] = []

    def add(self, refusal: Refusal) -> None:
        with self._lock:
            if len(self._seen) < _KEEP_REFUSALS:
                self._seen.append(refusal)

    def take(self) -> tuple[Refusal, ...]:
        with self._lock:
            seen, self._seen = tuple(self._seen), []
        return seen


class _Reading(threading.local):
    """What the decoders on this I/O thread are bound by: set by the transport that just read."""

    limit: int | None = None
    left: int | None = None
    broker: str = ""
    answer: str = ""
    refusals: RefusalLog | None = None


_reading = _Reading()


def _counted_range(count: int) -> range:
    """``range`` for the generated decoders: an array's count is charged to its answer's budget before a single
    entry is decoded."""
    left = _reading.left
    if left is not None and count > 0:
        left -= count
        _reading.left = left
        if left < 0:
            limit = _reading.limit
            detail = (f"broker {_reading.broker} answered {_reading.answer} with more than {limit:,} entries "
                      f"(an array of {count:,}; max_response_entries is {limit:,}): refused before decoding, "
                      "connection closed")
            if _reading.refusals is not None:
                _reading.refusals.add(Refusal(_reading.broker, "entries", detail))
            raise EntriesRefused(detail)
    return range(count)


_decoders: dict[Any, Callable[..., Any]] = {}
_original_compiled_decode_from = StructField.compiled_decode_from


def _bounded_compiled_decode_from(self: StructField, version: int, compact: bool = False, tagged: bool = False,
                                  data_class: Any = None) -> Callable[..., Any]:
    decode = _original_compiled_decode_from(self, version, compact=compact, tagged=tagged, data_class=data_class)
    bounded = _decoders.get(decode)
    if bounded is None:
        decode.__globals__["range"] = _counted_range
        # "list_transactions_response" -> "ListTransactions", as Kafka names its APIs
        name = "".join(part.capitalize() for part in str(self.name).removesuffix("_response").split("_"))

        def bounded(data: Any, pos: int, _decode: Callable[..., Any] = decode, _name: str = name) -> Any:
            reading = _reading
            if reading.limit is None:  # a thread txnwatch does not bound (another library's client)
                return _decode(data, pos)
            reading.left, reading.answer = reading.limit, f"{_name} v{version}"
            try:
                return _decode(data, pos)
            finally:
                reading.left = None

        _decoders[decode] = bounded
    return bounded


def install_entry_bound() -> None:
    """Every response decoder kafka-python generates from now on charges its arrays to the entry budget.

    Done once, at import: the decoders are generated on first use and cached, and txnwatch's clients are
    created after this module is imported.  Threads that never set a budget decode as before."""
    if StructField.compiled_decode_from is not _bounded_compiled_decode_from:
        StructField.compiled_decode_from = _bounded_compiled_decode_from


install_entry_bound()


class _Frames:
    """Where one connection's byte stream is in its frames (an Int32 size, then that many bytes)."""

    __slots__ = ("bound", "header", "remaining")

    def __init__(self, bound: int) -> None:
        self.bound = bound
        self.header = bytearray()
        self.remaining = 0

    def feed(self, data: bytes) -> tuple[int, int] | None:
        """Follow ``data``; (frames completed before it, the size) of the first frame above the bound, else None."""
        pos, end, completed = 0, len(data), 0
        while pos < end:
            if self.remaining:
                step = min(self.remaining, end - pos)
                self.remaining -= step
                pos += step
                if not self.remaining:
                    completed += 1
                continue
            take = min(4 - len(self.header), end - pos)
            self.header += data[pos:pos + take]
            pos += take
            if len(self.header) == 4:
                size = int.from_bytes(self.header, "big", signed=True)
                self.header.clear()
                if size < 0 or size > self.bound:
                    return completed, size
                self.remaining = size
                if not size:
                    completed += 1
        return None


def _answering(transport: Any, completed: int) -> str:
    """The request a frame answers: the connection's in-flight requests, oldest first."""
    try:
        header = transport._protocol.parser.in_flight_requests[completed]
        return f"{header.get_response_class().__name__.split('Response')[0]} v{header.request_api_version}"
    except Exception:  # nothing in flight (a frame nobody asked for), or a shape this version lacks
        return "no request in flight"


def bound_reads(transport: Any, bounds: ResponseBounds, broker: str, refusals: RefusalLog) -> None:
    """Replace ``transport``'s socket read with one that reads a bounded amount per wake-up and refuses a frame
    above ``bounds.max_response_bytes`` when its size field arrives."""
    frames = _Frames(bounds.max_response_bytes)
    is_ssl = isinstance(transport._sock, ssl.SSLSocket)
    limit = bounds.max_response_entries

    def sock_recv() -> tuple[bytes, Exception | None]:
        reading = _reading
        reading.limit, reading.broker, reading.refusals = limit, broker, refusals
        sock, chunks, total, err = transport._sock, [], 0, None
        # TLS: bytes already decrypted wait in the SSL object, where the selector cannot see them: take them too.
        while total < READ_BYTES_PER_WAKEUP or (is_ssl and sock.pending()):
            try:
                data = sock.recv(_RECV_BYTES)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except Exception as exc:
                err = Errors.KafkaConnectionError(exc)
                break
            if not data:
                err = Errors.KafkaConnectionError("socket disconnected")
                break
            chunks.append(data)
            total += len(data)
        received = b"".join(chunks)
        over = frames.feed(received)
        if over is not None:
            completed, size = over
            detail = (f"broker {broker} answered {_answering(transport, completed)} with a frame of {size:,} bytes "
                      f"(max_response_bytes is {bounds.max_response_bytes:,}): refused before reading it, "
                      "connection closed")
            refusals.add(Refusal(broker, "frame_bytes", detail))
            return b"", FrameRefused(detail)
        return received, err

    transport._sock_recv = sock_recv


class BoundedManager(KafkaConnectionManager):  # type: ignore[misc]  # kafka-python is untyped
    """kafka-python's connection manager whose every transport reads under ``bounds``."""

    def __init__(self, net: Any, bounds: ResponseBounds, refusals: RefusalLog, **config: Any) -> None:
        super().__init__(net, **config)
        self.bounds, self.refusals = bounds, refusals

    async def _build_transport(self, node: Any, timeout_at: float | None = None) -> Any:
        transport = await super()._build_transport(node, timeout_at=timeout_at)
        bound_reads(transport, self.bounds, f"{node.host}:{node.port} (node {node.node_id})", self.refusals)
        return transport


def bounded_client(bounds: ResponseBounds, refusals: RefusalLog) -> Callable[..., KafkaNetClient]:
    """A ``kafka_client`` for KafkaConsumer: its network client over a :class:`BoundedManager`."""

    def make(**config: Any) -> KafkaNetClient:
        net = NetworkSelector(**config)
        return KafkaNetClient(net=net, manager=BoundedManager(net, bounds, refusals, **config), **config)

    return make
