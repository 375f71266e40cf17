"""`txnwatch hanging`: one poll, Kafka's find-hanging verdict plus txnwatch's, for scripts and humans.

Unlike ``kafka-transactions.sh find-hanging`` it never stops at the first failed
request: partitions whose coordinator could not be asked are reported as
undetermined, and the exit code tells a script what happened.  And it hands over the
next step: under the table, per row, the ``txnwatch abort`` line that ends it, folded
between words (with shell continuations) so that it fits the terminal and still runs as
printed.  The table keeps what a person decides with (where, who, since when, why) in
whole cells at 80 columns; every other field is in ``--format json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from typing import Any

from txnwatch.core import exitcodes
from txnwatch.core.model import ClusterSnapshot
from txnwatch.detect import DetectionSettings, hanging

HEADERS = ("#", "Partition", "Producer id/epoch", "Start offset", "Last write", "Transactional id", "Reason")


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


def render_table(result: dict[str, Any], now_ms: int | None = None, width: int | None = None,
                 bootstrap_server: str | None = None, prog: str | None = None) -> str:
    """The find-hanging verdict in words a person reads at 3 a.m., fitted to the terminal, then the commands."""
    from txnwatch.cli import tables
    from txnwatch.core import commands, humanize
    from txnwatch.core.vocabulary import REASONS, HangingReason

    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    width = width or tables.terminal_width()
    rows = [(str(n), f"{h['topic']}-{h['partition']}", f"{h['producer_id']}/{h['producer_epoch']}",
             str(h["start_offset"]) if h["start_offset"] is not None else None,
             humanize.duration((now_ms - h["last_timestamp_ms"]) / 1000) + " ago" if h["last_timestamp_ms"] else None,
             h["transactional_id"], REASONS[HangingReason(h["reason"])].title)
            for n, h in enumerate(result["hanging"], 1)]
    limit = humanize.duration(result["max_transaction_timeout_ms"] / 1000)
    where = bootstrap_server or result["cluster"]
    if not rows:
        lines = [f"No hanging transaction on {where} (none open longer than transaction.max.timeout.ms, {limit})."]
    else:
        prog = prog or commands.program()
        fits = tables.natural_width(HEADERS, rows) <= width
        lines = [tables.render(HEADERS, rows, width=width), ""] if fits else []
        lines.append("Run a line as printed to end that transaction (drop --execute for a dry run):"
                     if bootstrap_server is not None else "")
        for n, (h, row) in enumerate(zip(result["hanging"], rows, strict=True), 1):
            if not fits:  # one block per transaction, its cells flowed whole onto as many lines as they need
                cells = [f"{HEADERS[i].lower()} {v}" for i, v in enumerate(row[:-1]) if i > 1 and v is not None]
                lines += ["", *tables.flow([f"{n}. {row[1]}", *cells, row[-1]], width, hang=4)]
            if bootstrap_server is not None and h["start_offset"] is not None:
                line = commands.abort_line(prog, bootstrap_server, h["topic"], h["partition"], h["start_offset"])
                lines += ([f"# {n}: {row[1]}", *commands.wrap_shell(line, width)] if fits else
                          ["    " + piece for piece in commands.wrap_shell(line, width - 4)])
    for u in result["undetermined"]:
        lines.append(f"undetermined: {u['topic']}-{u['partition']} producer {u['producer_id']}: {u['why']}")
    return "\n".join(lines)


def run(connection: Any, fmt: str, max_timeout_ms: int | None, bootstrap_server: str | None = None) -> tuple[int, str]:
    from txnwatch.kafka import ClusterUnreachable

    try:
        snapshot = connection.poll()
    except ClusterUnreachable as exc:
        return exitcodes.CLUSTER_UNREACHABLE, str(exc)
    now_ms = int(time.time() * 1000)
    result = find(snapshot, now_ms, max_timeout_ms)
    text = json.dumps(result, indent=2) if fmt == "json" else render_table(result, now_ms, bootstrap_server=bootstrap_server)
    return (exitcodes.FOUND_OR_FAILED if result["hanging"] else exitcodes.OK), text
