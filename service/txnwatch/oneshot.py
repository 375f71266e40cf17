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

from txnwatch.detect import DetectionSettings, hanging
from txnwatch.model import ClusterSnapshot

EXIT_CLEAN, EXIT_HANGING, EXIT_USAGE, EXIT_UNREACHABLE = 0, 1, 2, 3
HEADERS = ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
           "LastTimestamp", "Duration(min)", "TransactionalId", "Reason")


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


def render_table(result: dict[str, Any]) -> str:
    rows = [HEADERS] + [tuple(str(v if v is not None else "-") for v in (
        h["topic"], h["partition"], h["producer_id"], h["producer_epoch"], h["coordinator_epoch"], h["start_offset"],
        h["last_timestamp_ms"], h["duration_minutes"], h["transactional_id"], h["reason"])) for h in result["hanging"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    lines = ["\t".join(cell.ljust(w) for cell, w in zip(row, widths)) for row in rows]
    for u in result["undetermined"]:
        lines.append(f"undetermined: {u['topic']}-{u['partition']} producer {u['producer_id']}: {u['why']}")
    return "\n".join(lines)


def run(connection: Any, fmt: str, max_timeout_ms: int | None) -> tuple[int, str]:
    from txnwatch.kafka import ClusterUnreachable

    try:
        snapshot = connection.poll()
    except ClusterUnreachable as exc:
        return EXIT_UNREACHABLE, str(exc)
    result = find(snapshot, int(time.time() * 1000), max_timeout_ms)
    text = json.dumps(result, indent=2) if fmt == "json" else render_table(result)
    return (EXIT_HANGING if result["hanging"] else EXIT_CLEAN), text
