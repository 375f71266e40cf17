"""Types of the compiled batch walk (``_txnlog_walk.c``); ``txnwatch.kafka.txnlog_batches`` is its one user."""

from collections.abc import Callable
from typing import Any

END: int
MORE: int
DEFER: int

def configure(record_type: type[tuple[Any, ...]], states: tuple[Any, ...], value_kind: object) -> None: ...
def walk(data: bytes, pos: int, partition: int, skip_below: int, check_crcs: bool, fallback: Callable[..., Any],
         max_records: int) -> tuple[list[Any], int, int, int, int | None, int, int]: ...
def plain_v2(data: bytes) -> bool: ...
def crc32c(data: bytes) -> int: ...
