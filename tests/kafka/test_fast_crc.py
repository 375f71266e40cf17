"""Canary: kafka-python checks record-batch CRCs with the C ``crc32c`` package, not its pure-Python fallback.

kafka-python picks the implementation once, at import (``kafka.record.util``: ``from crc32c import crc32c``,
else ``kafka.record._crc32c``), and binds it as the default argument of ``calc_crc32c``, which every batch's
``validate_crc()`` calls on fetch.  The pure-Python table loop cost ~28 % of the transaction-log tail's CPU
(issue 25): if a kafka-python upgrade renames the import, or the dependency goes missing, this fails.
"""

from __future__ import annotations

import crc32c
from kafka.record import util
from kafka.record._crc32c import crc as pure_python_crc
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

# RFC 3720 (iSCSI), B.4: CRC-32C of the ASCII digits 1..9.
CHECK_VALUE = 0xE3069283


def test_kafka_python_binds_the_c_crc32c() -> None:
    (bound,) = util.calc_crc32c.__defaults__ or (None,)
    assert bound is crc32c.crc32c, f"kafka-python checks CRCs with {bound!r}, not the C crc32c package"
    assert bound is not pure_python_crc
    assert util.calc_crc32c(memoryview(b"123456789")) == CHECK_VALUE


def test_a_fetched_batch_is_validated_through_it() -> None:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16, offset=0)
    builder.append(timestamp=1_000, key=b"k", value=b"v" * 100)
    builder.close()
    raw = bytearray(builder.buffer())
    assert MemoryRecords(bytes(raw)).next_batch().validate_crc()
    raw[-1] ^= 0xFF  # one flipped bit in the last record: the C function must see it
    assert not MemoryRecords(bytes(raw)).next_batch().validate_crc()
