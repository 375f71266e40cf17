"""Kafka's own Java transactional producer in the lab: the client Kafka 4 users run.

kafka-python speaks the pre-KIP-890 transaction protocol (transaction version 1:
the client sends AddPartitionsToTxn and keeps its epoch across commits).  A Java
4.x client on a cluster whose `transaction.version` is finalized at 2 uses the
new one (KIP-890 part 2): the partition leader adds the partition itself, and the
coordinator bumps the producer epoch on every commit and abort.  That is why
polling misses most of the coordinator's history on Kafka 4 and why the lab must
run such a client.  On a 3.9 cluster the same program is a transaction version 1
client, with server-side verification (KIP-890 part 1).

The producer is `org.apache.kafka.tools.ProducerPerformance` from the cached
kafka-tools jars: with `--transactional-id` and `--transaction-duration-ms` it
commits a transaction every `transaction_duration_ms` while sending at a fixed
rate, and commits the last one when it has sent `num_records`.  It never aborts
on its own.  A second instance with the same transactional.id fences the
first: its InitProducerId makes the coordinator abort the first one's open
transaction (TV1: PrepareEpochFence; TV2: an abort with an epoch bump), and the
first exits with ProducerFencedException at its next send or commit.
"""

from __future__ import annotations

import math
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from txnwatch.lab.errors import LabError
from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION, classpath, require_tool, resolve_tools_jars, tools_version
from txnwatch.lab.processes import spawn, stop
from txnwatch.lab.reference import tools_log_opts

PRODUCER_PERFORMANCE = "org.apache.kafka.tools.ProducerPerformance"
#: What a fenced Java producer prints on its way out (the exception's class name in the stack trace).
#: Under transaction version 2 the new instance's InitProducerId aborts the open transaction with an epoch
#: bump, and the old instance can also die of InvalidTxnStateException on its next EndTxn (seen on 4.1.1 in
#: the suite, about one run in ten): the same fence, reported under another name.
FENCED_MARKERS = ("ProducerFencedException", "InvalidProducerEpochException", "InvalidTxnStateException")
_SUMMARY = re.compile(r"^(\d+) records sent, .*50th", re.MULTILINE)


@dataclass(frozen=True)
class JavaProducerSpec:
    """One ProducerPerformance run.  `duration_s` None runs until stopped (for background workloads)."""

    transactional_id: str
    topic: str
    #: Commit every this many ms: 500 gives the ~2 commits per second of the issue's measurements.
    transaction_duration_ms: int = 500
    records_per_second: int = 20
    duration_s: float | None = 30.0
    record_size_bytes: int = 100
    #: Must not exceed the brokers' transaction.max.timeout.ms (the pytest lab's is 15 s; the Java default 60 s).
    transaction_timeout_ms: int = 10_000
    extra_props: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.transaction_duration_ms <= 0 or self.records_per_second <= 0:
            raise ValueError("transaction_duration_ms and records_per_second must be positive")

    @property
    def num_records(self) -> int:
        if self.duration_s is None:
            return 2**62  # effectively unbounded: the process runs until stopped
        return max(1, math.ceil(self.records_per_second * self.duration_s))

    def command(self, bootstrap: str, kafka_version: str) -> list[str]:
        jars = resolve_tools_jars(kafka_version, quiet=True)
        props = {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": "5",
                 "transaction.timeout.ms": str(self.transaction_timeout_ms), **self.extra_props}
        return [require_tool("java"), "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                *tools_log_opts(tools_version(kafka_version)), "-cp", classpath(jars), PRODUCER_PERFORMANCE,
                "--topic", self.topic, "--num-records", str(self.num_records),
                "--throughput", str(self.records_per_second), "--record-size", str(self.record_size_bytes),
                "--transactional-id", self.transactional_id,
                "--transaction-duration-ms", str(self.transaction_duration_ms),
                "--producer-props", *(f"{k}={v}" for k, v in props.items())]


class JavaProducer:
    """A running ProducerPerformance process; its stdout and stderr go to `log_file`."""

    def __init__(self, spec: JavaProducerSpec, proc: subprocess.Popen[bytes], log_file: Path,
                 kafka_version: str) -> None:
        self.spec = spec
        self.kafka_version = kafka_version
        self.log_file = log_file
        self._proc = proc

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def running(self) -> bool:
        return self._proc.poll() is None

    def output(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    @property
    def fenced(self) -> bool:
        """True once the process has printed the exception a fenced producer dies of."""
        text = self.output()
        return any(marker in text for marker in FENCED_MARKERS)

    @property
    def records_sent(self) -> int | None:
        """From ProducerPerformance's final summary line; None until it has printed one (it has not finished,
        or it died, e.g. fenced)."""
        found = _SUMMARY.findall(self.output())
        return int(found[-1]) if found else None

    def wait(self, timeout_s: float) -> int:
        """Wait for the process to end by itself; LabError with the log's tail if it does not in time."""
        try:
            return self._proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise LabError(f"Java producer {self.spec.transactional_id} still runs after {timeout_s:.0f}s; "
                           f"last output:\n{self.output()[-2000:]}") from None

    def wait_for_output(self, needle: str, timeout_s: float) -> None:
        """Wait until the log contains `needle` (e.g. the first periodic 'records sent' report)."""
        deadline = time.monotonic() + timeout_s
        while needle not in self.output():
            if not self.running() and needle not in self.output():
                raise LabError(f"Java producer {self.spec.transactional_id} exited ({self.returncode}) before "
                               f"printing {needle!r}:\n{self.output()[-2000:]}")
            if time.monotonic() > deadline:
                raise LabError(f"Java producer {self.spec.transactional_id} printed no {needle!r} in "
                               f"{timeout_s:.0f}s:\n{self.output()[-2000:]}")
            time.sleep(0.2)

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM, then SIGKILL.  A transaction left open is aborted by its coordinator after
        `transaction_timeout_ms`."""
        stop({self._proc.pid: PRODUCER_PERFORMANCE}, timeout=timeout_s, children={self._proc.pid: self._proc})

    def __enter__(self) -> JavaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_java_producer(bootstrap: str, spec: JavaProducerSpec, log_dir: Path | str, *,
                        kafka_version: str = DEFAULT_KAFKA_VERSION, die_with_parent: bool = True) -> JavaProducer:
    """Start ProducerPerformance with `spec` against `bootstrap`, logging to `<log_dir>/java-producer-<id>-N.log`
    (numbered, so a second instance with the same id gets its own log)."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", spec.transactional_id)
    n = 1
    while (log_dir / f"java-producer-{safe}-{n}.log").exists():
        n += 1
    log_file = log_dir / f"java-producer-{safe}-{n}.log"
    proc = spawn(spec.command(bootstrap, kafka_version), log_file, log_dir, die_with_parent=die_with_parent)
    return JavaProducer(spec, proc, log_file, kafka_version)
