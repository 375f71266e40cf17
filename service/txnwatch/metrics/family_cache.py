"""/metrics pays for change: each family's compressed text is kept with a change token and reused while it holds.

Issue 25: the render cost ~0.79 CPU-s/min on an idle lab whose offsets and lags did not move, because
every render formatted and compressed every series again.  The collectors still build their families
from the latest views (cheap: tuples and a double array per family, txnwatch.metrics.render.LeanGauge),
but formatting and gzip are paid only for a family whose token changed since the previous render:

* a :class:`~txnwatch.metrics.render.LeanGauge` is cut into its header and chunks of ``CHUNK_ROWS`` rows, each
  with its own token (the chunk's label tuples and its values' bytes, compared exactly at C speed), so a
  family of 12,000 group partitions in which a few live ones moved formats and compresses a chunk or two;
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
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial

from prometheus_client.core import Metric

from txnwatch.metrics.render import GZIP_LEVEL, LeanGauge, is_lean, lean_header, lean_rows, write_family

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


def crc32_shift(length2: int) -> int:
    """x^(8 * length2) modulo the polynomial: the costly half of :func:`crc32_combine`, a function of B's length
    alone, so a cached piece keeps it (zlib's x2nmodp)."""
    p, k, n = 1 << 31, 3, length2  # x^0; k = 3: a length in bytes is 8 * n bits
    while n:
        if n & 1:
            p = _multmodp(_X2N[k & 31], p)
        n >>= 1
        k += 1
    return p


def crc32_combine(crc1: int, crc2: int, length2: int, shift: int | None = None) -> int:
    """The CRC-32 of A + B from crc32(A), crc32(B) and len(B) (zlib's crc32_combine, ~30 µs; a few µs when
    ``shift``, :func:`crc32_shift` of ``length2``, is given)."""
    return _multmodp(crc32_shift(length2) if shift is None else shift, crc1) ^ crc2


@dataclass(frozen=True, slots=True)
class Piece:
    """One family's text as raw deflate ending in a sync flush, with the text's CRC-32 and length."""

    token: object
    deflated: bytes
    crc: int
    length: int
    shift: int  # crc32_shift(length), kept with the piece: a reused piece's CRC combines in one multiplication


#: Rows of a big family formatted and compressed together (issue 25): a family of 12,000 group partitions in
#: which the workload's few live partitions move at every poll was formatted and compressed whole at every
#: render; now only the chunks holding a changed row are (~25 kB of text each).  On the peers lab a poll moves
#: ~150 rows in 18 big families, spread over ~23 chunks: at 1,024 rows a chunk that was 17,500 rows formatted
#: and compressed per render (33 ms CPU), at 256 rows 4,500 (12 ms), for a body 11 % larger (301 -> 334 kB:
#: each chunk starts its deflate without a dictionary) and ~340 pieces' tokens compared per render (~1 ms).
CHUNK_ROWS = 256


class FamilyCache:
    """The previous render's pieces by family name; one writer (the exposition, under its render lock).

    A LeanGauge is kept as its header's piece and one piece per ``CHUNK_ROWS`` rows, each with its own token
    (the rows' label tuples and the values' bytes, compared exactly); any other family as one piece."""

    def __init__(self, level: int = GZIP_LEVEL) -> None:
        self._level = level
        self._pieces: dict[str, list[Piece]] = {}
        self.reused = self.rendered = 0  # families, in the latest render (rendered: any of its chunks)
        self.chunks_rendered = 0  # pieces formatted and compressed in the latest render

    def render_gzip(self, families: Iterable[Metric]) -> bytes:
        """The families as one gzip member, byte for byte the same text as txnwatch.metrics.render.render_gzip."""
        pieces: dict[str, list[Piece]] = {}
        escaped: dict[str, str] = {}
        out = [GZIP_HEADER]
        crc, length = 0, 0
        self.reused = self.rendered = self.chunks_rendered = 0
        for metric in families:
            before = self.chunks_rendered
            family = self._lean_pieces(metric, escaped) if is_lean(metric) else [self._piece(metric, escaped)]
            if self.chunks_rendered > before:
                self.rendered += 1
            else:
                self.reused += 1
            pieces[metric.name] = family
            for piece in family:
                out.append(piece.deflated)
                crc = crc32_combine(crc, piece.crc, piece.length, piece.shift)
                length += piece.length
        out += [FINAL_BLOCK, struct.pack("<II", crc, length & 0xFFFFFFFF)]
        self._pieces = pieces  # families that vanished are dropped with the previous dict
        return b"".join(out)

    def _lean_pieces(self, metric: Metric, escaped: dict[str, str]) -> list[Piece]:
        assert isinstance(metric, LeanGauge)
        cached = self._pieces.get(metric.name, [])
        header_token = (metric.name, metric.documentation)
        head = cached[0] if cached and cached[0].token == header_token else None
        if head is None:
            head = self._compress(header_token, lambda sink: sink(lean_header(metric)))
        family = [head]
        rows, values, names = metric.rows, metric.values, metric.labelnames
        for k, start in enumerate(range(0, len(rows), CHUNK_ROWS)):
            stop = min(start + CHUNK_ROWS, len(rows))
            token = (names, tuple(rows[start:stop]), values[start:stop].tobytes())
            old = cached[k + 1] if k + 1 < len(cached) else None
            if old is not None and old.token == token:
                family.append(old)
                continue
            family.append(self._compress(token, partial(lean_rows, metric, start, stop, escaped=escaped)))
        return family

    def _piece(self, metric: Metric, escaped: dict[str, str]) -> Piece:
        text: list[bytes] = []
        write_family(metric, text.append, escaped)
        token = b"".join(text)  # a small family (counters, our own figures): its text is its token
        cached = self._pieces.get(metric.name)
        if cached is not None and len(cached) == 1 and cached[0].token == token:
            return cached[0]
        return self._compress(token, lambda sink: sink(token))

    def _compress(self, token: object, write: Callable[[Callable[[bytes], None]], object]) -> Piece:
        """One piece: what ``write`` sends to its sink, as raw deflate ending in a sync flush."""
        self.chunks_rendered += 1
        compressor = zlib.compressobj(self._level, zlib.DEFLATED, -zlib.MAX_WBITS)
        deflated: list[bytes] = []
        state = [0, 0]  # crc, length

        def sink(data: bytes) -> None:
            state[0] = zlib.crc32(data, state[0])
            state[1] += len(data)
            chunk = compressor.compress(data)
            if chunk:
                deflated.append(chunk)

        write(sink)
        deflated.append(compressor.flush(zlib.Z_SYNC_FLUSH))
        return Piece(token, b"".join(deflated), state[0], state[1], crc32_shift(state[1]))
