"""Bounded decompression, codec by codec: what fits comes back whole, a bomb stops at the budget.

Compressed inputs are made by kafka-python's own encoders (``kafka.codec``: gzip, xerial-framed
snappy, lz4 frame, zstd), the bytes a kafka-python producer writes; a second reference is
the codec library's own one-shot decompression of the same bytes.
"""

from __future__ import annotations

import gzip
import tracemalloc
from collections.abc import Callable

import pytest
import snappy
import zstandard
from kafka import codec as kafka_codec
from kafka.record import default_records, legacy_records
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from txnwatch.kafka import decompress
from txnwatch.kafka.decompress import GZIP, LZ4, SNAPPY, ZSTD, OverBudget, Prefix

MiB = 1024 * 1024
ENCODERS: dict[int, Callable[[bytes], bytes]] = {
    GZIP: kafka_codec.gzip_encode, SNAPPY: kafka_codec.snappy_encode, LZ4: kafka_codec.lz4_encode,
    ZSTD: kafka_codec.zstd_encode}
CODECS = [pytest.param(c, id=decompress.CODEC_NAMES[c]) for c in ENCODERS]
# Not all zeros: varied enough that every codec produces several blocks (snappy's xerial blocks are 32 KiB).
PAYLOAD = b"".join(b"record %06d of a batch; " % i for i in range(20_000))  # 26 bytes each: 520,000


@pytest.mark.parametrize("codec", CODECS)
def test_what_fits_comes_back_whole(codec: int) -> None:
    packed = ENCODERS[codec](PAYLOAD)
    assert decompress.whole(codec, packed, len(PAYLOAD)) == PAYLOAD
    assert decompress.prefix(codec, memoryview(packed), 10 * MiB) == Prefix(PAYLOAD, True)


@pytest.mark.parametrize("codec", CODECS)
def test_one_byte_over_the_budget_is_refused_and_the_prefix_is_exact(codec: int) -> None:
    packed = ENCODERS[codec](PAYLOAD)
    with pytest.raises(OverBudget, match="more than 519,999 bytes"):
        decompress.whole(codec, packed, len(PAYLOAD) - 1)
    cut = decompress.prefix(codec, packed, 100_000)
    assert not cut.complete
    if codec == SNAPPY:  # whole blocks only: each block's length is checked before it is decompressed
        assert len(cut.data) == 3 * 32 * 1024 and PAYLOAD.startswith(cut.data)
    else:
        assert cut.data == PAYLOAD[:100_000]


@pytest.mark.parametrize("codec", CODECS)
def test_a_bomb_stops_at_the_budget_without_growing_the_heap(codec: int) -> None:
    # 64 MiB of zeros: gzip 64 KB, zstd 2 KB, lz4 270 KB, snappy 3 MB (snappy's best ratio is ~21:1).
    packed = ENCODERS[codec](bytes(64 * MiB))
    tracemalloc.start()
    try:
        with pytest.raises(OverBudget):
            decompress.whole(codec, packed, MiB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MiB + len(packed), f"{peak / MiB:.1f} MiB traced while refusing a 64 MiB bomb"


@pytest.mark.parametrize("codec", CODECS)
def test_cut_input_is_an_error_not_a_short_answer(codec: int) -> None:
    packed = ENCODERS[codec](PAYLOAD)
    with pytest.raises(ValueError, match=r"ends early|cannot be decompressed"):
        decompress.prefix(codec, packed[:len(packed) // 2], 10 * MiB)


def test_gzip_members_and_zstd_frames_are_read_one_after_the_other() -> None:
    # Java's GZIPInputStream reads concatenated members; kafka-python reads zstd across frames.
    assert decompress.whole(GZIP, gzip.compress(b"abc") + gzip.compress(b"def"), 6) == b"abcdef"
    assert decompress.whole(ZSTD, zstandard.compress(b"abc" * 50) + zstandard.compress(b"def"), 153)[-6:] == b"abcdef"
    with pytest.raises(OverBudget):
        decompress.whole(GZIP, gzip.compress(b"abc") + gzip.compress(b"def"), 5)


def test_raw_snappy_is_read_like_the_library_reads_it() -> None:
    block = snappy.compress(PAYLOAD)
    assert decompress.whole(SNAPPY, block, len(PAYLOAD)) == snappy.decompress(block)
    assert decompress.prefix(SNAPPY, block, len(PAYLOAD) - 1) == Prefix(b"", False)


def test_a_zstd_frame_asking_for_a_huge_window_is_refused() -> None:
    params = zstandard.ZstdCompressionParameters(window_log=26, write_content_size=False)  # a 64 MiB window
    streamed = zstandard.ZstdCompressor(compression_params=params).compressobj()  # size unknown: window kept
    packed = streamed.compress(bytes(MiB)) + streamed.flush()
    with pytest.raises(ValueError, match="zstd batch cannot be decompressed"):
        decompress.prefix(ZSTD, packed, 64 * MiB)


def test_unknown_codecs_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown compression type 7"):
        decompress.prefix(7, b"x", MiB)
    assert decompress.prefix(0, b"abcdef", 4) == Prefix(b"abcd", False)


def _gzip_batch(value: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=GZIP, batch_size=1 << 20, offset=0)
    builder.append(timestamp=1_000, key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


def test_kafka_python_decompresses_through_the_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canary: kafka-python 3 still calls the module-level names that bound_kafka_python replaces."""
    for module in (default_records, legacy_records):
        for name in ("gzip_decode", "snappy_decode", "lz4_decode", "zstd_decode"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    decompress.bound_kafka_python(limit=MiB)
    small = MemoryRecords(_gzip_batch(b"v" * 1000)).next_batch()
    assert [r.value for r in small] == [b"v" * 1000]
    bomb = MemoryRecords(_gzip_batch(bytes(16 * MiB))).next_batch()
    with pytest.raises(OverBudget):
        list(bomb)


def test_the_daemon_bounds_kafka_python_when_it_imports_the_kafka_layer() -> None:
    import txnwatch.kafka  # noqa: F401  # the import installs the bound

    assert default_records.gzip_decode.__qualname__ == "bounded_gzip_decode"
    assert default_records.zstd_decode.__qualname__ == "bounded_zstd_decode"


def test_cramjam_is_loaded_only_when_a_snappy_batch_is_met() -> None:
    """The daemon installs cramjam, not python-snappy (2.6 MB resident once imported, which kafka.codec does at
    import when python-snappy is installed): as the daemon's process runs it, in a child without python-snappy."""
    import subprocess
    import sys

    payload = PAYLOAD[:2_600]
    block = snappy.compress(payload)
    code = (
        "import sys; sys.modules['snappy'] = None\n"
        "from txnwatch.kafka import decompress\n"
        "assert 'cramjam' not in sys.modules, 'cramjam imported at start'\n"
        f"assert decompress.whole(2, bytes.fromhex({block.hex()!r}), {len(payload)}) == "
        f"bytes.fromhex({payload.hex()!r})\n"
        "assert 'cramjam' in sys.modules\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
