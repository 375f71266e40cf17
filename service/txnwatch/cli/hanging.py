"""`txnwatch hanging`: one poll, Kafka's find-hanging verdict plus txnwatch's, for scripts and humans.

Unlike ``kafka-transactions.sh find-hanging`` it never stops at the first failed
request: partitions whose coordinator could not be asked are reported as
undetermined, and the exit code tells a script what happened.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from txnwatch.core import exitcodes
from txnwatch.core.model import ClusterSnapshot
from txnwatch.detect import DetectionSettings, hanging

HEADERS = ("Topic", "Partition", "Producer id", "Producer epoch", "Coordinator epoch", "Start offset",
           "Last write", "Since last write", "Transactional id", "Reason")


def find(snapshot: ClusterSnapshot, now_ms: int, max_timeout_ms: int | None) -> dict[str, Any]:
    if max_timeout_ms is not None:
        snapshot = replace(snapshot, max_transaction_timeout_ms=max_timeout_ms)
    found, undetermined = hanging.find_hanging(snapshot, now_ms, DetectionSettings())
    return {
        "cluster": snapshot.cluster,
        "max_transaction_timeout_ms": snapshot.max_transaction_timeout_ms,
        "hanging": [{"topic": h.tp.topic, "partition": h.tp.partition, "producer_id": h.producer_id,
                     "producer_epoch": h.producer_epoch, "coordinator_epoch": h.coordinator_epoch,
                     "start_offset": h.txn_start_offset, "last_timestamp_ms": h.last_timestamp_ms,
                     "duration_minutes": h.age_ms // 60_000, "transactional_id": h.transactional_id,
                     "reason": h.reason.value} for h in sorted(found, key=lambda h: (h.tp, h.producer_id))],
        "undetermined": [{"topic": u.tp.topic, "partition": u.tp.partition, "producer_id": u.producer_id,
                          "why": u.why} for u in undetermined],
        "errors": [{"api": e.api, "target": e.target, "error": e.name, "class": e.error_class.value}
                   for e in snapshot.errors],
    }


def render_table(result: dict[str, Any], now_ms: int | None = None, width: int | None = None) -> str:
    """Kafka's find-hanging columns in words a person reads at 3 a.m., fitted to the terminal."""
    from txnwatch.cli import tables
    from txnwatch.core import humanize
    from txnwatch.core.epoch import from_kafka_ms
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    rows = [(h["topic"], h["partition"], h["producer_id"], h["producer_epoch"], h["coordinator_epoch"],
             h["start_offset"], humanize.timestamp(from_kafka_ms(h["last_timestamp_ms"])),
             humanize.duration((now_ms - h["last_timestamp_ms"]) / 1000) if h["last_timestamp_ms"] else None,
             h["transactional_id"], h["reason"]) for h in result["hanging"]]
    limit = humanize.duration(result["max_transaction_timeout_ms"] / 1000)
    none = f"no hanging transaction on {result['cluster']} (transaction.max.timeout.ms {limit})"
    lines = [tables.render(HEADERS, rows, width=width) if rows else none]
    for u in result["undetermined"]:
        lines.append(f"undetermined: {u['topic']}-{u['partition']} producer {u['producer_id']}: {u['why']}")
    return "\n".join(lines)


def run(connection: Any, fmt: str, max_timeout_ms: int | None) -> tuple[int, str]:
    from txnwatch.kafka import ClusterUnreachable

    try:
        snapshot = connection.poll()
    except ClusterUnreachable as exc:
        return exitcodes.CLUSTER_UNREACHABLE, str(exc)
    now_ms = int(time.time() * 1000)
    result = find(snapshot, now_ms, max_timeout_ms)
    text = json.dumps(result, indent=2) if fmt == "json" else render_table(result, now_ms)
    return (exitcodes.FOUND_OR_FAILED if result["hanging"] else exitcodes.OK), text
