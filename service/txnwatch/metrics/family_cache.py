"""/metrics pays for change: each family's compressed text is kept with a change token and reused while it holds.

Issue 25: the render cost ~0.79 CPU-s/min on an idle lab whose offsets and lags did not move, because
every render formatted and compressed every series again.  The collectors still build their families
from the latest views (cheap: tuples and a double array per family, txnwatch.metrics.render.LeanGauge),
but formatting and gzip are paid only for a family whose token changed since the previous render:

* a :class:`~txnwatch.metrics.render.LeanGauge`'s token is its name, help, label names and a hash of its
  label tuples and of its values' bytes (C-speed: the label strings cache their own hashes);
* any other family (small: counters, our own figures) is formatted by prometheus-client as before and its
  text is the token.

The body stays one gzip member, so every client reads it (several members would be valid gzip, but
decoders such as httpx's stop after the first).  Each family is compressed on its own into raw deflate
ending with a sync flush (a byte-aligned, non-final empty stored block); the pieces are concatenated,
a final empty block closes the stream, and the gzip trailer's CRC-32 is combined from the families'
CRCs (:func:`crc32_combine`, zlib's algorithm, since Python's zlib does not expose it) and their lengths.
Compressing families apart costs a few per cent of size (each starts without a dictionary).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from prometheus_client.core import Metric

from txnwatch.metrics.render import GZIP_LEVEL, LeanGauge, write_family

_POLY = 0xEDB88320  # CRC-32 (gzip), reflected
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # deflate, no name, mtime 0, unknown OS
FINAL_BLOCK = b"\x03\x00"  # an empty final block with fixed Huffman codes


def _multmodp(a: int, b: int) -> int:
    """a(x) * b(x) modulo the CRC polynomial (zlib's multmodp)."""
    m, p = 1 << 31, 0
    while True:
        if a & m:
            p ^= b
            if not a & (m - 1):
                return p
        m >>= 1
        b = (b >> 1) ^ _POLY if b & 1 else b >> 1


def _powers() -> tuple[int, ...]:
    table, p = [], 1 << 30  # x^1
    for _ in range(32):
        table.append(p)
        p = _multmodp(p, p)
    return tuple(table)


_X2N = _powers()  # x^(2^k) modulo the polynomial


def crc32_combine(crc1: int, crc2: int, length2: int) -> int:
    """The CRC-32 of A + B from crc32(A), crc32(B) and len(B) (zlib's crc32_combine, ~30 µs)."""
    p, k, n = 1 << 31, 3, length2  # x^0; k = 3: a length in bytes is 8 * n bits
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return _multmodp(p, crc1) ^ crc2


@dataclass(frozen=True, slots=True)
class Piece:
    """One family's text as raw deflate ending in a sync flush, with the text's CRC-32 and length."""

    token: object
    deflated: bytes
    crc: int
    length: int


def token_of(metric: Metric) -> object | None:
    """What must change for a LeanGauge's text to change; None for other families (their text is the token)."""
    if not isinstance(metric, LeanGauge):
        return None
    return (metric.name, metric.documentation, metric.labelnames, len(metric.rows), hash(tuple(metric.rows)),
            hash(metric.values.tobytes()))


class FamilyCache:
    """The previous render's pieces by family name; one writer (the exposition, under its render lock)."""

    def __init__(self, level: int = GZIP_LEVEL) -> None:
        self._level = level
        self._pieces: dict[str, Piece] = {}
        self.reused = self.rendered = 0  # families, in the latest render

    def render_gzip(self, families: Iterable[Metric]) -> bytes:
        """The families as one gzip member, byte for byte the same text as txnwatch.metrics.render.render_gzip."""
        pieces: dict[str, Piece] = {}
        escaped: dict[str, str] = {}
        out = [GZIP_HEADER]
        crc, length = 0, 0
        self.reused = self.rendered = 0
        for metric in families:
            piece = self._piece(metric, escaped)
            pieces[metric.name] = piece
            out.append(piece.deflated)
            crc = crc32_combine(crc, piece.crc, piece.length)
            length += piece.length
        out += [FINAL_BLOCK, struct.pack("<II", crc, length & 0xFFFFFFFF)]
        self._pieces = pieces  # families that vanished are dropped with the previous dict
        return b"".join(out)

    def _piece(self, metric: Metric, escaped: dict[str, str]) -> Piece:
        token = token_of(metric)
        text: list[bytes] = []
        if token is None:
            write_family(metric, text.append, escaped)
            token = b"".join(text)
        cached = self._pieces.get(metric.name)
        if cached is not None and cached.token == token:
            self.reused += 1
            return cached
        self.rendered += 1
        compressor = zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS)
        deflated: list[bytes] = []
        state = [0, 0]  # crc, length

        def sink(data: bytes) -> None:
            state[0] = zlib.crc32(data, state[0])
            state[1] += len(data)
            chunk = compressor.compress(data)
            if chunk:
                deflated.append(chunk)

        if text:
            sink(b"".join(text))
        else:
            write_family(metric, sink, escaped)
        deflated.append(compressor.flush(zlib.Z_SYNC_FLUSH))
        return Piece(token, b"".join(deflated), state[0], state[1])
