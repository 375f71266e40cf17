"""Kafka's own `kafka-transactions` tool (TransactionsCommand from kafka-tools) as the reference.

txnwatch's answers are only credible if they match what Kafka itself reports,
so tests run the real Java tool against the lab and compare field by field.
The parsers turn its tab-separated tables into plain dicts with snake_case
keys and int values where Kafka prints integers.
"""

from __future__ import annotations

import builtins
import re
import subprocess
from typing import Any

from txnwatch.core.model import split_topic_partition
from txnwatch.lab.errors import LabError
from txnwatch.lab.jars import (
    DEFAULT_KAFKA_VERSION,
    cache_root,
    classpath,
    kafka_major,
    require_tool,
    resolve_tools_jars,
    tools_version,
)

_TOOLS_LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.err.ref = ERR
"""
_TOOLS_LOG4J1 = """\
log4j.rootLogger=WARN, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.Target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%p %m (%c)%n
"""


def tools_log_opts(version: str) -> list[str]:
    """Tool logging goes to stderr at WARN, so stdout holds nothing but the table we parse."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    if kafka_major(version) >= 4:
        path = root / "log4j2-tools.properties"
        if not path.exists():
            path.write_text(_TOOLS_LOG4J2)
        return [f"-Dlog4j2.configurationFile={path}"]
    path = root / "log4j-tools.properties"
    if not path.exists():
        path.write_text(_TOOLS_LOG4J1)
    return [f"-Dlog4j.configuration=file:{path}"]


def run_tool(main_class: str, *args: str, kafka_version: str = DEFAULT_KAFKA_VERSION, timeout: float = 120.0,
             check: bool = True, name: str | None = None) -> str:
    """Run one of Kafka's client-side tools (a main class in kafka-tools) and return its stdout.

    With `check`, a non-zero exit raises LabError carrying the tool's stderr.
    """
    jars = resolve_tools_jars(kafka_version)
    cmd = [require_tool("java"), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
           *tools_log_opts(tools_version(kafka_version)), "-cp", classpath(jars), main_class, *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise LabError(f"{name or main_class} {' '.join(args)} failed (exit {proc.returncode}):\n"
                       f"{proc.stderr.strip()[-3000:]}\n{proc.stdout.strip()[-1000:]}")
    return proc.stdout


def run_kafka_transactions(bootstrap: str, *args: str, kafka_version: str = DEFAULT_KAFKA_VERSION,
                           timeout: float = 120.0, check: bool = True) -> str:
    """Run `kafka-transactions.sh --bootstrap-server BOOTSTRAP ARGS...` and return its stdout."""
    return run_tool("org.apache.kafka.tools.TransactionsCommand", "--bootstrap-server", bootstrap, *args,
                    kafka_version=kafka_version, timeout=timeout, check=check, name="kafka-transactions")


def finalized_features(bootstrap: str, kafka_version: str = DEFAULT_KAFKA_VERSION) -> dict[str, int | str]:
    """`kafka-features.sh describe`: feature name -> finalized level (an int, or a string such as
    metadata.version's `4.1-IV1`).  Kafka 4's default finalizes transaction.version 2."""
    out = run_tool("org.apache.kafka.tools.FeatureCommand", "--bootstrap-server", bootstrap, "describe",
                   kafka_version=kafka_version, name="kafka-features")
    return parse_features(out)


def parse_features(output: str) -> dict[str, int | str]:
    """Lines like `Feature: transaction.version<TAB>SupportedMinVersion: 0<TAB>...FinalizedVersionLevel: 2<TAB>...`."""
    features: dict[str, int | str] = {}
    for line in output.splitlines():
        cells = dict(cell.split(": ", 1) for cell in line.strip().split("\t") if ": " in cell)
        if "Feature" in cells and "FinalizedVersionLevel" in cells:
            level = cells["FinalizedVersionLevel"].strip()
            features[cells["Feature"].strip()] = int(level) if re.fullmatch(r"-?\d+", level) else level
    return features


# -- parsing ------------------------------------------------------------------------------------------


def _snake(name: str) -> str:
    name = re.sub(r"\((\w+)\)", r"_\1", name)  # Duration(min) -> Duration_min
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return name.lower().strip("_")


def _value(cell: str) -> Any:
    """Integers become int; Kafka prints an empty OptionalLong (e.g. no open transaction) as "None"."""
    if re.fullmatch(r"-?\d+", cell):
        return int(cell)
    if cell == "None":
        return None
    return cell


def parse_table(output: str) -> list[dict[str, Any]]:
    """Parse TransactionsCommand's tab-separated, space-padded table (header line first)."""
    lines = [line for line in output.splitlines() if "\t" in line]
    if not lines:
        return []
    header = [_snake(h.strip()) for h in lines[0].rstrip("\t").split("\t")]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.rstrip("\t").split("\t")]
        cells += [""] * (len(header) - len(cells))
        rows.append({key: _value(cell) for key, cell in zip(header, cells, strict=False)})
    return rows


def _topic_partitions(cell: Any) -> list[tuple[str, int]]:
    if not cell:
        return []
    out = []
    for item in str(cell).split(","):
        out.append(split_topic_partition(item.strip()))
    return sorted(out)


def parse_list(output: str) -> list[dict[str, Any]]:
    """`list` → [{transactional_id, coordinator, producer_id, transaction_state}]."""
    return parse_table(output)


def parse_describe(output: str) -> dict[str, Any]:
    """`describe --transactional-id X` → one dict; `topic_partitions` becomes a sorted [(topic, partition)]."""
    rows = parse_table(output)
    if len(rows) != 1:
        raise LabError(f"expected one row from `describe`, got {len(rows)}:\n{output}")
    row = rows[0]
    row["topic_partitions"] = _topic_partitions(row.get("topic_partitions"))
    return row


def parse_describe_producers(output: str) -> list[dict[str, Any]]:
    """`describe-producers --topic T --partition P` → one dict per active producer
    (current_transaction_start_offset is -1 when no transaction is open)."""
    return parse_table(output)


def parse_find_hanging(output: str) -> list[dict[str, Any]]:
    """`find-hanging (--broker-id N | --topic T ...)` → one dict per hanging transaction."""
    return parse_table(output)


class KafkaTransactionsTool:
    """The reference tool bound to one cluster, with one method per subcommand returning parsed rows."""

    def __init__(self, bootstrap: str, kafka_version: str = DEFAULT_KAFKA_VERSION) -> None:
        self.bootstrap = bootstrap
        self.kafka_version = kafka_version

    def run(self, *args: str) -> str:
        return run_kafka_transactions(self.bootstrap, *args, kafka_version=self.kafka_version)

    def list(self) -> list[dict[str, Any]]:
        return parse_list(self.run("list"))

    def describe(self, transactional_id: str) -> dict[str, Any]:
        return parse_describe(self.run("describe", "--transactional-id", transactional_id))

    def describe_producers(self, topic: str, partition: int, broker_id: int | None = None) -> builtins.list[dict[str, Any]]:
        args = ["describe-producers", "--topic", topic, "--partition", str(partition)]
        if broker_id is not None:
            args += ["--broker-id", str(broker_id)]
        return parse_describe_producers(self.run(*args))

    def find_hanging(self, *, broker_id: int | None = None, topic: str | None = None,
                     partition: int | None = None, max_transaction_timeout_min: int | None = None
                     ) -> builtins.list[dict[str, Any]]:
        args = ["find-hanging"]
        if broker_id is not None:
            args += ["--broker-id", str(broker_id)]
        if topic is not None:
            args += ["--topic", topic]
        if partition is not None:
            args += ["--partition", str(partition)]
        if max_transaction_timeout_min is not None:
            args += ["--max-transaction-timeout", str(max_transaction_timeout_min)]
        return parse_find_hanging(self.run(*args))

    def abort(self, topic: str, partition: int, *, start_offset: int | None = None,
              producer_id: int | None = None, producer_epoch: int | None = None,
              coordinator_epoch: int | None = None) -> str:
        args = ["abort", "--topic", topic, "--partition", str(partition)]
        if start_offset is not None:
            args += ["--start-offset", str(start_offset)]
        else:
            args += ["--producer-id", str(producer_id), "--producer-epoch", str(producer_epoch),
                     "--coordinator-epoch", str(coordinator_epoch if coordinator_epoch is not None else -1)]
        return self.run(*args)
