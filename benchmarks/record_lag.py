"""What counting the record lag costs per partition read: txnwatch's header walk vs decoding every record.

Each poll reads at most ``record_count.PARTITION_MAX_BYTES`` (1 MiB) per lagging partition with a
read_committed Fetch and counts the records a consumer would get (kafka/record_count.py).  Whole
batches are counted from their header; only the batch the committed offset falls inside is
decompressed.  The alternative, decoding every record as a consumer does (kafka-python's
``MemoryRecords``), is timed beside it on the same bytes, alternating, with CPU seconds beside wall
time and the machine's load.  No Kafka needed: the answers are built from real record batches.

    .venv/bin/python benchmarks/record_lag.py            # ~10 s
    .venv/bin/python benchmarks/record_lag.py --runs 5
"""

from __future__ import annotations

import argparse
import functools
import os
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "service"))

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c

from txnwatch.kafka.record_count import PARTITION_MAX_BYTES, count_records


def _batch(base: int, count: int, producer_id: int, codec: int, value: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=codec, batch_size=1 << 24, offset=0,
                                   transactional=True, producer_id=producer_id, producer_epoch=0, base_sequence=0)
    for _ in range(count):
        builder.append(timestamp=1_000, key=None, value=value)
    builder.close()
    return struct.pack(">q", base) + bytes(builder.buffer())[8:]


def _marker(offset: int, producer_id: int, commit: bool) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, offset=0,
                                   transactional=True, producer_id=producer_id, producer_epoch=0, base_sequence=0)
    builder.append(timestamp=1_000, key=struct.pack(">hh", 0, 1 if commit else 0), value=b"")
    builder.close()
    raw = bytearray(builder.buffer())
    struct.pack_into(">h", raw, 21, struct.unpack_from(">h", raw, 21)[0] | 0x20)
    struct.pack_into(">I", raw, 17, calc_crc32c(bytes(raw[21:])))
    return struct.pack(">q", offset) + bytes(raw)[8:]


def answer(records_per_txn: int, codec: int, value_bytes: int) -> tuple[bytes, list[tuple[int, int]], int, int]:
    """One read's worth (up to 1 MiB) of transactions, every third aborted: (bytes, aborted, LSO, expected count)."""
    raw, offset, expected, index = b"", 0, 0, 0
    aborted: list[tuple[int, int]] = []
    value = os.urandom(value_bytes // 2).hex().encode()[:value_bytes]
    while True:
        data = _batch(offset, records_per_txn, 7, codec, value)
        commit = index % 3 != 2
        marker = _marker(offset + records_per_txn, 7, commit)
        if len(raw) + len(data) + len(marker) > PARTITION_MAX_BYTES:
            return raw, aborted, offset, expected
        if not commit:
            aborted.append((7, offset))
        raw += data + marker
        expected += records_per_txn if commit else 0
        offset += records_per_txn + 1
        index += 1


def decode_all(raw: bytes) -> int:
    """Every record decoded, as a consumer's iteration does (aborts not even filtered: a floor)."""
    records, count = MemoryRecords(raw), 0
    while (batch := records.next_batch()) is not None:
        count += sum(1 for _ in batch)
    return count


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - wall) / runs, (time.process_time() - cpu) / runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; per 1 MiB read, mean of {args.runs} runs")
    print(f"{'answer':<44}{'offsets':>8}{'records':>8}  {'count ms (cpu)':>16}  {'decode-all ms (cpu)':>20}  ratio")
    for name, per_txn, codec, value_bytes, committed_at in (
            ("1-record txns, 100 B, uncompressed", 1, 0, 100, 0),
            ("100-record txns, 100 B, gzip", 100, 1, 100, 0),
            ("100-record txns, 100 B, gzip, mid-batch start", 100, 1, 100, 150),
            ("100-record txns, 1 KiB, lz4", 100, 3, 1024, 0)):
        raw, aborted, lso, expected = answer(per_txn, codec, value_bytes)
        counted = count_records(raw, committed_at, lso, aborted)
        assert counted is not None and (committed_at or counted.records == expected), (counted, expected)
        count_s = decode_s = (0.0, 0.0)
        for _ in range(2):  # alternate, so a load spike hits both
            c = timed(functools.partial(count_records, raw, committed_at, lso, aborted), args.runs)
            d = timed(functools.partial(decode_all, raw), args.runs)
            count_s, decode_s = (count_s[0] + c[0] / 2, count_s[1] + c[1] / 2), (decode_s[0] + d[0] / 2,
                                                                                  decode_s[1] + d[1] / 2)
        print(f"{name:<44}{lso:>8}{counted.records:>8}  {count_s[0] * 1e3:>7.2f} ({count_s[1] * 1e3:>6.2f})  "
              f"{decode_s[0] * 1e3:>10.2f} ({decode_s[1] * 1e3:>7.2f})  {decode_s[1] / max(count_s[1], 1e-9):>5.0f}x")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
