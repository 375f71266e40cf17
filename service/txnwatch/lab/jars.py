"""Resolve Kafka's jars from Maven Central into a per-version cache outside the repo.

The pinned pom (lab/kafka/pom.xml) is the single source of truth for which
artifacts a lab runs.  Jars are resolved once per machine and version and
reused; a lock file keeps two processes (say, two pytest sessions) from both
running Maven into the same directory.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from txnwatch.lab.errors import LabError, ToolMissingError

DEFAULT_KAFKA_VERSION = "4.1.1"
#: The Kafka lines the lab and the end-to-end tests cover: the last 3.x, the default, and the newest line Maven
#: Central serves.
OLDER_KAFKA_VERSION = "3.9.1"
NEWEST_KAFKA_VERSION = "4.4.0"
#: Releases whose kafka-tools jar Maven Central does not serve, each with the release whose tools
#: (TransactionsCommand, ProducerPerformance, DumpLogSegments from 4.3) run against its brokers instead, over the
#: same public protocol.  Every release a lab resolves gets its own kafka-tools; a release goes in here only
#: while Maven Central serves its brokers without its tools (4.4.0's brokers came first, its tools later: it
#: was {"4.4.0": "4.3.1"} until kafka-tools 4.4.0 appeared).  Maven's error for a missing kafka-tools names
#: this table.  The broker-side tools in kafka_2.13 (StorageTool, DumpLogSegments up to 4.2) always stay on the
#: broker's own version.
TOOLS_FALLBACK: dict[str, str] = {}
_POM = Path(__file__).with_name("kafka") / "pom.xml"
_COMPLETE_MARKER = ".complete"


def cache_root() -> Path:
    """TXNWATCH_LAB_CACHE wins, then $XDG_CACHE_HOME/txnwatch/kafka, then ~/.cache/txnwatch/kafka."""
    explicit = os.environ.get("TXNWATCH_LAB_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "txnwatch" / "kafka"


def require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissingError(name)
    return path


def kafka_major(version: str) -> int:
    return int(version.split(".", 1)[0])


def tools_version(version: str) -> str:
    """The release whose kafka-tools jar runs the client-side tools against a `version` cluster."""
    return TOOLS_FALLBACK.get(version, version)


def resolve_tools_jars(version: str = DEFAULT_KAFKA_VERSION, *, quiet: bool = False) -> Path:
    """Jars for Kafka's client-side tools (kafka-tools) against a `version` cluster (see TOOLS_FALLBACK)."""
    return resolve_kafka_jars(tools_version(version), quiet=quiet)


def resolve_kafka_jars(version: str = DEFAULT_KAFKA_VERSION, *, quiet: bool = False) -> Path:
    """Return the directory holding every runtime jar for Kafka `version`, downloading it if needed.

    A `.complete` marker is written only after Maven succeeded, so an interrupted
    download is redone rather than half-used.
    """
    target = cache_root() / version
    if _complete(version, target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{version}.lock"
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _complete(version, target):  # another process finished while we waited
            return target
        _download(version, target, quiet=quiet)
    return target


def _complete(version: str, target: Path) -> bool:
    """Resolved whole, and with the release's own kafka-tools unless TOOLS_FALLBACK says Maven Central has none:
    a cache resolved while it had none (brokers alone) is resolved again once the tools are wanted from it."""
    if not (target / _COMPLETE_MARKER).exists():
        return False
    return version in TOOLS_FALLBACK or (target / f"kafka-tools-{version}.jar").exists()


def _download(version: str, target: Path, *, quiet: bool) -> None:
    flags = [f"-Dkafka.version={version}"]
    if kafka_major(version) < 4:
        flags.append("-Dkafka3")
    if version in TOOLS_FALLBACK:
        flags.append("-Dno-kafka-tools")
    hint = (f"; if Maven Central serves Kafka {version}'s brokers without its kafka-tools, add "
            f"{version!r} to TOOLS_FALLBACK in {Path(__file__).name} with the release whose tools run against it")
    _maven_copy(_POM, target, flags, f"Apache Kafka {version}", "kafka_2.13-*.jar", quiet=quiet,
                hint=hint if version not in TOOLS_FALLBACK else "")


def _maven_copy(pom: Path, target: Path, flags: list[str], what: str, expect: str, *, quiet: bool,
                hint: str = "") -> None:
    """`mvn dependency:copy-dependencies` of `pom` into a staging dir, renamed to `target` once complete."""
    mvn = require_tool("mvn")
    require_tool("java")
    if not quiet:
        print(f"[lab] resolving {what} from Maven Central into {target} (once per machine)...",
              file=sys.stderr, flush=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    cmd = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
           f"-DoutputDirectory={staging}", "-DincludeScope=runtime", *flags]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0 or not any(staging.glob(expect)):
        shutil.rmtree(staging, ignore_errors=True)
        missing_tools = hint and "kafka-tools" in proc.stdout + proc.stderr
        raise LabError(f"Maven could not resolve {what} (exit {proc.returncode}){hint if missing_tools else ''}:\n"
                       f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (staging / _COMPLETE_MARKER).write_text(target.name + "\n")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    if not quiet:
        print(f"[lab] {what}: {len(list(target.glob('*.jar')))} jars cached", file=sys.stderr, flush=True)


_FLINK_POM = Path(__file__).with_name("flink") / "pom.xml"


def flink_versions() -> tuple[str, str]:
    """The pinned (Flink, flink-connector-kafka) versions, read from lab/flink/pom.xml (the one source)."""
    text = _FLINK_POM.read_text()
    found = [re.search(rf"<{name}>([^<]+)</{name}>", text) for name in ("flink.version", "flink.connector.kafka.version")]
    if found[0] is None or found[1] is None:
        raise LabError(f"{_FLINK_POM} names no flink.version or flink.connector.kafka.version")
    return found[0].group(1), found[1].group(1)


def resolve_flink_jars(*, quiet: bool = False) -> Path:
    """The directory holding Flink's and its Kafka connector's runtime jars (lab/flink/pom.xml), resolved once per
    machine into the lab cache, as Kafka's are."""
    flink, connector = flink_versions()
    target = cache_root() / f"flink-{flink}-kafka-{connector}"
    if (target / _COMPLETE_MARKER).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (target / _COMPLETE_MARKER).exists():
            _maven_copy(_FLINK_POM, target, [], f"Flink {flink} with flink-connector-kafka {connector}",
                        "flink-connector-kafka-*.jar", quiet=quiet)
    return target


_JMX_POM = Path(__file__).with_name("kafka") / "jmx-exporter-pom.xml"
#: The lab brokers' exporter rules (the common Kafka naming; see the file).
JMX_EXPORTER_CONFIG = Path(__file__).with_name("kafka") / "jmx-exporter.yaml"


def jmx_exporter_version() -> str:
    """The pinned io.prometheus.jmx:jmx_prometheus_javaagent version, read from its pom (the one source)."""
    match = re.search(r"<jmx.exporter.version>([^<]+)</jmx.exporter.version>", _JMX_POM.read_text())
    if match is None:
        raise LabError(f"{_JMX_POM} names no jmx.exporter.version")
    return match.group(1)


def resolve_jmx_exporter(*, quiet: bool = False) -> Path:
    """The Prometheus JMX exporter agent jar, from Maven Central into the jar cache once per machine."""
    version = jmx_exporter_version()
    target = cache_root() / f"jmx-exporter-{version}"
    if not (target / _COMPLETE_MARKER).exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / f".jmx-exporter-{version}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (target / _COMPLETE_MARKER).exists():
                _maven_copy(_JMX_POM, target, [], f"the JMX exporter {version}", "jmx_prometheus_javaagent-*.jar",
                            quiet=quiet)
    (jar,) = target.glob("jmx_prometheus_javaagent-*.jar")
    return jar


def classpath(jar_dir: Path) -> str:
    """A JVM wildcard classpath: the JVM expands `dir/*` itself, keeping command lines short."""
    return str(jar_dir / "*")
