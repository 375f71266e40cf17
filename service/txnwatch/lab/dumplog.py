"""Kafka's own DumpLogSegments as the reference reader of the coordinators' log (`__transaction_state`).

txnwatch's exact counters (commits, aborts, epoch bumps, fences) come from
tailing the transaction log; the only independent truth for them is what
Kafka's own tool decodes from the broker's segment files:
`DumpLogSegments --transaction-log-decoder --files <segments>`.  This module
runs it and parses its output into one record per coordinator write, then
counts what happened per transactional id.

Two output formats exist, both parsed:

* Kafka 3.x (Scala TransactionLogMessageParser):
  `key: transaction_metadata::transactionalId=ID payload: producerId:0,producerEpoch:3,state=Ongoing,
  partitions=[t-0,u-1],txnLastUpdateTimestamp=...,txnTimeoutMs=10000`
* Kafka 4.x (generated JSON of TransactionLogKey/Value):
  `key: {"type":"0","data":{"transactionalId":"ID"}} payload: {"version":"1","data":{"producerId":0,
  "producerEpoch":3,"transactionTimeoutMs":10000,"transactionStatus":1,"transactionPartitions":[...],...}}`;
  4.4's own tool prints the state by its name (`"transactionStatus":"Ongoing"`), 4.0-4.3's by its id.

A tombstone (an expired id) prints `payload: <DELETE>`.  The tool lives in
kafka_2.13 as `kafka.tools.DumpLogSegments` up to 4.2 and in kafka-tools as
`org.apache.kafka.tools.DumpLogSegments` from 4.3 (a release in jars.TOOLS_FALLBACK uses that
release's); whichever the jars hold is used.
"""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnwatch.core.model import TRANSACTION_STATE_TOPIC, split_topic_partition
from txnwatch.core.vocabulary import STATE_BY_ID, TxnState
from txnwatch.lab.errors import LabError
from txnwatch.lab.jars import (
    DEFAULT_KAFKA_VERSION,
    classpath,
    require_tool,
    resolve_kafka_jars,
    resolve_tools_jars,
    tools_version,
)
from txnwatch.lab.reference import tools_log_opts

#: TransactionState ids as the coordinator persists them (4.x prints the number).
STATES = tuple(state.value for state in STATE_BY_ID)
_NEW_CLASS = "org/apache/kafka/tools/DumpLogSegments.class"
_RECORD = re.compile(r"^\|?\s*offset: (?P<offset>\d+) CreateTime: (?P<ts>-?\d+) .*? key: (?P<key>.*?) "
                     r"payload: (?P<payload>.*)$")
_DUMPING = re.compile(r"^Dumping (?P<path>.+)$")
_PARTITION_DIR = re.compile(r"__transaction_state-(\d+)")
_V3_KEY = re.compile(r"^transaction_metadata::transactionalId=(?P<id>.*)$")
_V3_VALUE = re.compile(r"^producerId:(?P<pid>-?\d+),producerEpoch:(?P<epoch>-?\d+),state=(?P<state>\w+),"
                       r"partitions=\[(?P<parts>[^\]]*)\],txnLastUpdateTimestamp=(?P<updated>-?\d+),"
                       r"txnTimeoutMs=(?P<timeout>-?\d+)$")


@dataclass(frozen=True)
class CoordinatorRecord:
    """One write of a transaction coordinator, as DumpLogSegments decodes it.  `state` is None for a
    tombstone (the id expired); `start_ms` and `client_transaction_version` are None where the tool's
    format does not print them (Kafka 3.x)."""

    log_partition: int
    offset: int
    create_time_ms: int
    transactional_id: str
    state: str | None
    producer_id: int = -1
    producer_epoch: int = -1
    timeout_ms: int = 0
    partitions: tuple[tuple[str, int], ...] = ()
    last_update_ms: int = -1
    start_ms: int | None = None
    client_transaction_version: int | None = None
    #: The value's PreviousProducerId / NextProducerId tags as the tool prints them (Kafka 4.3+ writes them;
    #: None where the record has none: Kafka <= 4.2, KAFKA-20310).
    previous_producer_id: int | None = None
    next_producer_id: int | None = None

    @property
    def tombstone(self) -> bool:
        return self.state is None


def _partitions_v3(cell: str) -> tuple[tuple[str, int], ...]:
    out = []
    for item in filter(None, (c.strip() for c in cell.split(","))):
        out.append(split_topic_partition(item))
    return tuple(sorted(out))


def _parse_key(key: str) -> str:
    match = _V3_KEY.match(key)
    if match:
        return match.group("id")
    data = json.loads(key)
    return str(data["data"]["transactionalId"])


def _parse_payload(payload: str) -> dict[str, Any] | None:
    payload = payload.strip()
    if payload in ("<DELETE>", "null"):
        return None
    match = _V3_VALUE.match(payload)
    if match:
        return {"state": match.group("state"), "producer_id": int(match.group("pid")),
                "producer_epoch": int(match.group("epoch")), "timeout_ms": int(match.group("timeout")),
                "partitions": _partitions_v3(match.group("parts")), "last_update_ms": int(match.group("updated"))}
    data = json.loads(payload)["data"]
    status = data["transactionStatus"]
    if isinstance(status, str):  # 4.4's tool: the state's name
        status = STATES.index(status) if status in STATES else status
    parts = tuple(sorted((p["topic"], int(i)) for p in data.get("transactionPartitions") or ()
                         for i in p["partitionIds"]))
    start = data.get("transactionStartTimestampMs")
    return {"state": STATES[status] if isinstance(status, int) and 0 <= status < len(STATES) else f"Unknown({status})",
            "producer_id": int(data["producerId"]), "producer_epoch": int(data["producerEpoch"]),
            "timeout_ms": int(data["transactionTimeoutMs"]), "partitions": parts,
            "last_update_ms": int(data["transactionLastUpdateTimestampMs"]),
            "start_ms": None if start is None or start < 0 else int(start),
            "client_transaction_version": data.get("clientTransactionVersion", 0),
            "previous_producer_id": _tagged_id(data, "previousProducerId"),
            "next_producer_id": _tagged_id(data, "nextProducerId")}


def _tagged_id(data: dict[str, Any], name: str) -> int | None:
    """A producer id tag of the value: absent or -1 (its default, never written) is None."""
    value = data.get(name)
    return int(value) if value is not None and int(value) >= 0 else None


def parse_dump(output: str) -> list[CoordinatorRecord]:
    """Every record line of a `--transaction-log-decoder` dump, in the order printed (per log partition,
    by offset).  The partition comes from the `Dumping .../__transaction_state-N/...log` line before it.
    A record line the parser cannot read raises LabError naming it: a reference that guesses is no reference."""
    records = []
    partition = -1
    for line in output.splitlines():
        dumping = _DUMPING.match(line)
        if dumping:
            found = _PARTITION_DIR.search(dumping.group("path"))
            partition = int(found.group(1)) if found else -1
            continue
        match = _RECORD.match(line)
        if not match:
            continue
        try:
            tid = _parse_key(match.group("key"))
            value = _parse_payload(match.group("payload"))
        except (ValueError, KeyError, TypeError) as exc:
            raise LabError(f"DumpLogSegments printed a record this parser cannot read ({exc!r}):\n{line}") from exc
        base: dict[str, Any] = {"log_partition": partition, "offset": int(match.group("offset")),
                                "create_time_ms": int(match.group("ts")), "transactional_id": tid}
        records.append(CoordinatorRecord(**base, **value) if value is not None
                       else CoordinatorRecord(**base, state=None))
    return records


# -- counting ---------------------------------------------------------------------------------------------------


@dataclass
class IdHistory:
    """What the coordinator log says happened to one transactional id.

    * commits / aborts: transitions into CompleteCommit / CompleteAbort (a repeated identical record, as a
      reloading coordinator may write, is not a second one).
    * epoch_bumps: how far the producer epoch rose between consecutive records under the same producer id,
      summed (under transaction version 2 every commit and abort bumps it by one; so does InitProducerId).
    * producer_id_changes: records under a different producer id than the previous one (epoch exhaustion,
      KIP-360), not counted as epoch bumps.
    * timeout_aborts: the coordinator's aborts of a transaction that outlived its timeout: a PrepareAbort over
      an Ongoing transaction, under the same producer id with a raised epoch, written at least the transaction's
      timeout after it started, whatever follows (a producer that died with it open is never heard of again).
    * fences: transactions a new producer instance ended: an abort that raised the epoch and is followed
      directly by Empty with a further bump (the new instance's InitProducerId, which found the old one's
      transaction open: TV1's PrepareEpochFence, TV2's abort with bump), unless the transaction had already
      outlived its timeout (then the coordinator's timeout abort came first and is counted as such).
    """

    transactional_id: str
    commits: int = 0
    aborts: int = 0
    epoch_bumps: int = 0
    producer_id_changes: int = 0
    fences: int = 0
    timeout_aborts: int = 0
    tombstones: int = 0
    records: list[CoordinatorRecord] = field(default_factory=list)

    @property
    def last(self) -> CoordinatorRecord | None:
        return self.records[-1] if self.records else None


def histories(records: list[CoordinatorRecord]) -> dict[str, IdHistory]:
    """Per transactional id, in log order (an id lives in one log partition, so offsets order it)."""
    by_id: dict[str, IdHistory] = {}
    for record in sorted(records, key=lambda r: (r.log_partition, r.offset)):
        history = by_id.setdefault(record.transactional_id, IdHistory(record.transactional_id))
        _apply(history, record)
    return by_id


def _apply(h: IdHistory, r: CoordinatorRecord) -> None:
    prev = next((p for p in reversed(h.records) if not p.tombstone), None)
    h.records.append(r)
    if r.tombstone:
        h.tombstones += 1
        return
    if prev is not None:
        if r.producer_id != prev.producer_id:
            h.producer_id_changes += 1
        elif r.producer_epoch > prev.producer_epoch:
            h.epoch_bumps += r.producer_epoch - prev.producer_epoch
    same = prev is not None and (prev.state, prev.producer_id, prev.producer_epoch) == (
        r.state, r.producer_id, r.producer_epoch)
    if r.state == TxnState.COMPLETE_COMMIT and not same:
        h.commits += 1
    elif r.state == TxnState.COMPLETE_ABORT and not same:
        h.aborts += 1
    elif r.state == TxnState.EMPTY and prev is not None and prev.state == TxnState.COMPLETE_ABORT:
        _classify_abort_end(h, r)
    elif (r.state == TxnState.PREPARE_ABORT and prev is not None and prev.state == TxnState.ONGOING
          and r.producer_id == prev.producer_id and r.producer_epoch > prev.producer_epoch and _outlived(prev, r)):
        h.timeout_aborts += 1


def _outlived(ongoing: CoordinatorRecord, abort: CoordinatorRecord) -> bool:
    """The abort was written at least the transaction's timeout after the transaction started."""
    started = ongoing.start_ms if ongoing.start_ms is not None else ongoing.last_update_ms
    return abort.last_update_ms - started >= ongoing.timeout_ms


def _classify_abort_end(h: IdHistory, empty: CoordinatorRecord) -> None:
    """`empty` follows a CompleteAbort: was that abort a fence by the InitProducerId that wrote `empty`?"""
    live = [p for p in h.records[:-1] if not p.tombstone]
    complete = live[-1]
    prepare = next((p for p in reversed(live) if p.state == TxnState.PREPARE_ABORT), None)
    ongoing = next((p for p in reversed(live) if p.state == TxnState.ONGOING), None)
    if prepare is None or ongoing is None or empty.producer_id != complete.producer_id:
        return
    bumped = prepare.producer_epoch > ongoing.producer_epoch and empty.producer_epoch > complete.producer_epoch
    if not bumped:
        return
    if not _outlived(ongoing, prepare):  # past its timeout it was the coordinator's abort, counted at the PrepareAbort
        h.fences += 1


@dataclass(frozen=True)
class Totals:
    commits: int
    aborts: int
    epoch_bumps: int
    fences: int
    producer_id_changes: int
    timeout_aborts: int

    @classmethod
    def of(cls, by_id: dict[str, IdHistory], ids: set[str] | None = None) -> Totals:
        chosen = [h for tid, h in by_id.items() if ids is None or tid in ids]
        return cls(*(sum(getattr(h, name) for h in chosen) for name in
                     ("commits", "aborts", "epoch_bumps", "fences", "producer_id_changes", "timeout_aborts")))


# -- running the tool -------------------------------------------------------------------------------------------


def _tool(kafka_version: str) -> tuple[str, Path]:
    """(main class, jar dir): the kafka-tools one where the tools jars have it (4.3+), else core's."""
    tools = resolve_tools_jars(kafka_version, quiet=True)
    for jar in tools.glob("kafka-tools-*.jar"):
        with zipfile.ZipFile(jar) as z:
            if _NEW_CLASS in z.namelist():
                return "org.apache.kafka.tools.DumpLogSegments", tools
    return "kafka.tools.DumpLogSegments", resolve_kafka_jars(kafka_version, quiet=True)


def dump_transaction_log(files: list[Path], kafka_version: str = DEFAULT_KAFKA_VERSION,
                         timeout: float = 120.0) -> str:
    """Run `DumpLogSegments --transaction-log-decoder --files f1,f2,...` and return its stdout."""
    if not files:
        raise LabError(f"no {TRANSACTION_STATE_TOPIC} segment files to dump")
    main_class, jars = _tool(kafka_version)
    cmd = [require_tool("java"), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           *tools_log_opts(tools_version(kafka_version) if main_class.startswith("org.") else kafka_version),
           "-cp", classpath(jars), main_class, "--transaction-log-decoder", "--files", ",".join(map(str, files))]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise LabError(f"DumpLogSegments failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def coordinator_log(lab: Any, timeout: float = 120.0) -> list[CoordinatorRecord]:
    """The whole `__transaction_state` of a lab, read from its brokers' segment files.  With replicas, each
    partition is read from one broker only (the lowest id holding it), so records are not counted twice."""
    chosen: dict[str, Path] = {}
    for broker in sorted(lab.brokers, key=lambda b: b.node_id):
        for directory in sorted((Path(broker.config_file).parent / "data").glob(f"{TRANSACTION_STATE_TOPIC}-*")):
            chosen.setdefault(directory.name, directory)
    files = sorted(segment for directory in chosen.values() for segment in directory.glob("*.log"))
    return parse_dump(dump_transaction_log(files, lab.kafka_version, timeout))
