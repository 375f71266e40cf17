"""Record-batch decompression that never produces more than a budget of bytes.

A tenant can write a record that is small on the wire and huge inside: 200 MB of zeros
gzip to 204 KB, under the default ``max.message.bytes``.  kafka-python decompresses a
whole batch in one call (``gzip.GzipFile.read()``, ``zstandard``'s ``read()`` to the end,
``lz4.frame.decompress``), so reading that one record once took the daemon from 100 to
702 MB, past the chart's 512Mi limit, and again after every restart (issue 23).  Here
every codec Kafka uses (``CompressionType``: 1 gzip, 2 snappy, 3 lz4, 4 zstd) is
decompressed incrementally with a cap on its output:

* gzip: ``zlib.decompressobj`` with ``max_length`` (member after member, as Java's
  ``GZIPInputStream`` reads them);
* zstd: ``compression.zstd`` (``backports.zstd`` before Python 3.14) with ``max_length``,
  frame after frame, with the decoder's window capped too (a frame may ask for a 2 GiB
  window; the levels Kafka allows up to 19 need 8 MiB);
* lz4: ``lz4.frame.LZ4FrameDecompressor`` with ``max_length`` (Kafka writes one frame);
* snappy (``cramjam``): Kafka's xerial framing is a list of raw snappy blocks, and each
  block starts with its decompressed length (the format's preamble), so blocks are checked
  against the budget before any is decompressed.

:func:`prefix` gives the first ``limit`` bytes and whether that was all (the time-lag
fetch needs only the records up to one offset); :func:`whole` refuses a batch larger
than the budget with :class:`OverBudget`.  :func:`bound_kafka_python` makes
kafka-python's own record iteration (the transaction-log tail's consumer) use
:func:`whole`.
"""

from __future__ import annotations

import struct
import sys
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lz4.frame

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODEC_NAMES = {0: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
#: What a batch read by kafka-python (the transaction-log tail) may decompress to.  A coordinator writes one
#: record per batch, a few hundred bytes (a transaction over 10,000 partitions: ~100 KB).
KAFKA_PYTHON_BUDGET_BYTES = 32 * 1024 * 1024
#: zstd's window, log2: level 19 (the highest non-"ultra" level) uses 8 MiB on large inputs; Kafka's default
#: level 3, 2 MiB.  A frame asking for more is refused rather than allocated.
ZSTD_MAX_WINDOW_LOG = 24
_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER_BYTES = 16


class OverBudget(ValueError):
    """The batch decompresses to more than the budget; nothing past the budget was produced."""

    def __init__(self, codec: int, limit: int) -> None:
        self.codec, self.limit = codec, limit
        super().__init__(f"{CODEC_NAMES.get(codec, codec)} batch decompresses to more than {_size(limit)}, "
                         "the budget for one record batch")


@dataclass(frozen=True, slots=True)
class Prefix:
    """The first bytes of a decompressed batch; ``complete`` when they are all of it."""

    data: bytes
    complete: bool


def prefix(codec: int, data: bytes | memoryview, limit: int) -> Prefix:
    """At most ``limit`` decompressed bytes of ``data``; raises ValueError on bytes the codec cannot read."""
    if codec == 0:
        raw = bytes(data)
        return Prefix(raw[:limit], len(raw) <= limit)
    reader = _READERS.get(codec)
    if reader is None:
        raise ValueError(f"unknown compression type {codec}")
    try:
        return reader(bytes(data), limit)
    except (zlib.error, zstd.ZstdError, RuntimeError, struct.error, _SnappyError) as exc:
        # lz4 reports a damaged frame as RuntimeError.
        raise ValueError(f"{CODEC_NAMES[codec]} batch cannot be decompressed: {exc}") from exc


def whole(codec: int, data: bytes | memoryview, limit: int) -> bytes:
    """All of ``data`` decompressed, or :class:`OverBudget` once it passes ``limit`` bytes."""
    got = prefix(codec, data, limit)
    if not got.complete:
        raise OverBudget(codec, limit)
    return got.data


def _gzip(data: bytes, limit: int) -> Prefix:
    out = bytearray()
    pending = data
    while pending:
        member = zlib.decompressobj(16 + zlib.MAX_WBITS)  # gzip header and trailer, as GZIPInputStream
        out += member.decompress(pending, limit + 1 - len(out))
        if len(out) > limit:
            return Prefix(bytes(out[:limit]), False)
        if not member.eof:
            raise ValueError("gzip batch ends early")
        pending = member.unused_data
        if not pending.strip(b"\x00"):  # trailing zero padding, which gzip readers skip
            break
    return Prefix(bytes(out), True)


def _zstd(data: bytes, limit: int) -> Prefix:
    out = bytearray()
    pending = data
    while pending:  # frame after frame, as kafka-python reads them (read_across_frames)
        frame = zstd.ZstdDecompressor(options={zstd.DecompressionParameter.window_log_max: ZSTD_MAX_WINDOW_LOG})
        out += frame.decompress(pending, limit + 1 - len(out))
        while len(out) <= limit and not frame.eof and not frame.needs_input:
            out += frame.decompress(b"", limit + 1 - len(out))
        if len(out) > limit:
            return Prefix(bytes(out[:limit]), False)
        if not frame.eof:
            raise ValueError("zstd batch ends early")
        pending = frame.unused_data
    return Prefix(bytes(out), True)


def _lz4(data: bytes, limit: int) -> Prefix:
    decompressor = lz4.frame.LZ4FrameDecompressor()
    out = bytearray(decompressor.decompress(data, max_length=limit + 1))
    while len(out) <= limit and not decompressor.eof and not decompressor.needs_input:
        out += decompressor.decompress(b"", max_length=limit + 1 - len(out))
    if len(out) > limit:
        return Prefix(bytes(out[:limit]), False)
    if not decompressor.eof:
        raise ValueError("lz4 batch ends early")
    return Prefix(bytes(out), True)


class _SnappyError(Exception):
    """cramjam's DecompressionError, raised as this (cramjam is imported on the first snappy batch)."""


def _snappy(data: bytes, limit: int) -> Prefix:
    # cramjam (2.6 MB of resident memory once imported) is loaded only when a snappy batch is met; kafka-python's
    # own snappy support (python-snappy) is not installed with the daemon.
    import cramjam

    if not data.startswith(_XERIAL_MAGIC):
        blocks = [data]  # one raw block, as librdkafka can write
    else:
        blocks, pos = [], _XERIAL_HEADER_BYTES
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            if size < 0 or pos + 4 + size > len(data):
                raise ValueError("snappy batch ends early")
            blocks.append(data[pos + 4:pos + 4 + size])
            pos += 4 + size
    out = bytearray()
    for block in blocks:
        if _snappy_length(block) > limit - len(out):
            return Prefix(bytes(out), False)
        try:
            out += cramjam.snappy.decompress_raw(block)
        except cramjam.DecompressionError as exc:
            raise _SnappyError(str(exc)) from exc
    return Prefix(bytes(out), True)


def _snappy_length(block: bytes) -> int:
    """A raw snappy block's preamble: its decompressed length as a little-endian base-128 varint."""
    value = shift = 0
    for byte in block[:5]:
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value
        shift += 7
    raise ValueError("snappy block without a length")


_READERS: dict[int, Callable[[bytes, int], Prefix]] = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 and n % (1024 * 1024) == 0 else f"{n:,} bytes"


def bound_kafka_python(limit: int = KAFKA_PYTHON_BUDGET_BYTES) -> None:
    """Make kafka-python decompress record batches through :func:`whole`, for every consumer in this process.

    kafka-python 3's record batches call module-level ``gzip_decode``, ``snappy_decode``, ``lz4_decode`` and
    ``zstd_decode`` (imported by name into ``kafka.record.default_records`` and
    ``legacy_records``) and has no setting to cap them; these names are replaced, and
    ``tests/kafka/test_decompress.py`` pins that kafka-python still reads them.  A batch over the budget makes
    its consumer's ``poll()`` raise :class:`OverBudget` at that batch, every time, instead of growing the heap.
    Idempotent.
    """
    from kafka.record import default_records, legacy_records

    def bounded(codec: int) -> Callable[[Any], bytes]:
        def decode(payload: Any) -> bytes:
            return whole(codec, payload, limit)
        decode.__qualname__ = f"bounded_{CODEC_NAMES[codec]}_decode"
        return decode

    # lz4_decode_old_kafka (magic 0 only) mends Kafka 0.8/0.9's LZ4 header with xxhash, which is not installed:
    # it refuses before decompressing anything.
    replacements = {"gzip_decode": bounded(GZIP), "snappy_decode": bounded(SNAPPY), "lz4_decode": bounded(LZ4),
                    "zstd_decode": bounded(ZSTD)}
    for module in (default_records, legacy_records):
        for name, function in replacements.items():
            if hasattr(module, name):
                setattr(module, name, function)
