"""A local KRaft cluster of real Apache Kafka processes: format, start, wait, stop, and break on purpose.

State lives in `<lab_dir>/lab.json` so that `txnwatch lab down` in another
shell stops exactly the processes `txnwatch lab up` started, and so the
workload generator and fault injection can find the brokers.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from txnwatch.lab.errors import LabError
from txnwatch.lab.jars import (
    JMX_EXPORTER_CONFIG,
    classpath,
    kafka_major,
    require_tool,
    resolve_jmx_exporter,
    resolve_kafka_jars,
)
from txnwatch.lab.ports import free_ports, port_open
from txnwatch.lab.processes import process_state, signal_if_ours, spawn, stop
from txnwatch.lab.proxy import ProxyControl
from txnwatch.lab.settings import (
    KerberosListener,
    LabSettings,
    NodePorts,
    TransactionSettings,
    format_properties,
    render_properties,
)

STATE_FILE = "lab.json"
CONTROLLER_ID = 0  # dedicated controller; brokers are 1..N
STARTUP_TIMEOUT_S = 120.0

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.target = {target}
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = warn
logger.state.name = state.change.logger
logger.state.level = warn
"""
_LOG4J1 = """\
log4j.rootLogger={level}, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.Target={target1}
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
"""


def default_lab_dir() -> Path:
    explicit = os.environ.get("TXNWATCH_LAB_DIR")
    if explicit:
        return Path(explicit).expanduser()
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(state) / "txnwatch" / "lab"


def _progress(msg: str) -> None:
    print(f"[lab] {msg}", file=sys.stderr, flush=True)


@dataclass
class LabNode:
    """One Kafka process.  `port` is what clients use (the proxy's port when proxied)."""

    node_id: int
    roles: list[str]
    pid: int | None
    config_file: str
    log_file: str
    port: int | None = None
    broker_port: int | None = None
    internal_port: int | None = None
    controller_port: int | None = None
    #: The JMX exporter agent's HTTP port (brokers of a lab with `jmx_exporter`).
    metrics_port: int | None = None
    #: The GSSAPI listener's port (brokers of a lab with `kerberos`).
    kerberos_port: int | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles


@dataclass
class LabState:
    lab_dir: str
    kafka_version: str
    cluster_id: str
    bootstrap_servers: str
    nodes: list[LabNode]
    settings: dict[str, Any]
    proxy_pid: int | None = None
    #: Background workload processes (`txnwatch lab workload --background`): scenario -> pid.
    workloads: dict[str, int] = field(default_factory=dict)
    proxy_control_port: int | None = None
    started_at: float = field(default_factory=time.time)

    def save(self) -> None:
        path = Path(self.lab_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, lab_dir: Path) -> LabState:
        path = lab_dir / STATE_FILE
        if not path.exists():
            raise LabError(f"no lab state in {lab_dir} (start one with `txnwatch lab up --dir {lab_dir}`)")
        raw = json.loads(path.read_text())
        raw["nodes"] = [LabNode(**n) for n in raw["nodes"]]
        return cls(**raw)


class LabCluster:
    """Handle on a running lab; built by `start_lab` (we are the parent) or `LabCluster.load` (another shell)."""

    managed = True

    def __init__(self, state: LabState, children: dict[int, subprocess.Popen[bytes]] | None = None,
                 die_with_parent: bool = False) -> None:
        self.state = state
        self._children = children if children is not None else {}
        self._die_with_parent = die_with_parent

    # -- identity -------------------------------------------------------------------------------

    @classmethod
    def load(cls, lab_dir: Path | str | None = None) -> LabCluster:
        return cls(LabState.load(Path(lab_dir) if lab_dir else default_lab_dir()))

    @property
    def bootstrap_servers(self) -> str:
        return self.state.bootstrap_servers

    @property
    def kafka_version(self) -> str:
        return self.state.kafka_version

    @property
    def lab_dir(self) -> Path:
        return Path(self.state.lab_dir)

    @property
    def brokers(self) -> list[LabNode]:
        return [n for n in self.state.nodes if n.is_broker]

    @property
    def settings(self) -> LabSettings:
        raw = dict(self.state.settings)
        raw["transactions"] = TransactionSettings(**raw["transactions"])
        raw["kerberos"] = KerberosListener(**raw["kerberos"]) if raw.get("kerberos") else None
        return LabSettings(**raw)

    @property
    def kerberos_bootstrap_servers(self) -> str | None:
        """The brokers' GSSAPI-only listener (a lab with `kerberos`), else None."""
        krb = self.settings.kerberos
        ports = [n.kerberos_port for n in self.brokers if n.kerberos_port]
        return ",".join(f"{krb.host}:{port}" for port in ports) if krb and ports else None

    @property
    def transaction_max_timeout_ms(self) -> int:
        return self.settings.transactions.max_timeout_ms

    @property
    def proxy(self) -> ProxyControl | None:
        return ProxyControl(self.state.proxy_control_port) if self.state.proxy_control_port else None

    def broker_metrics_urls(self) -> dict[int, str]:
        """Broker id -> its JMX exporter's /metrics URL (empty unless the lab runs with `jmx_exporter`)."""
        return {n.node_id: f"http://127.0.0.1:{n.metrics_port}/metrics" for n in self.brokers if n.metrics_port}

    def node(self, node_id: int) -> LabNode:
        for n in self.state.nodes:
            if n.node_id == node_id:
                return n
        raise LabError(f"no node {node_id} in this lab (nodes: {[n.node_id for n in self.state.nodes]})")

    def node_state(self, node_id: int) -> str:
        n = self.node(node_id)
        return process_state(n.pid, n.config_file, self._children.get(n.pid or 0))

    def status(self) -> dict[str, Any]:
        nodes = [{"node_id": n.node_id, "roles": n.roles, "pid": n.pid, "port": n.port,
                  "state": self.node_state(n.node_id), "log": n.log_file} for n in self.state.nodes]
        proxy = None
        if self.state.proxy_pid:
            proxy = {"pid": self.state.proxy_pid, "control_port": self.state.proxy_control_port,
                     "state": process_state(self.state.proxy_pid, self._proxy_marker,
                                            self._children.get(self.state.proxy_pid))}
        workloads = {name: {"pid": pid, "state": process_state(pid, self._workload_marker(name),
                                                               self._children.get(pid))}
                     for name, pid in self.state.workloads.items()}
        return {"lab_dir": self.state.lab_dir, "kafka_version": self.kafka_version,
                "cluster_id": self.state.cluster_id, "bootstrap_servers": self.bootstrap_servers,
                "transaction_max_timeout_ms": self.transaction_max_timeout_ms,
                "partition_verification": self.settings.transactions.partition_verification_enable,
                "broker_metrics_urls": self.broker_metrics_urls(),
                "transaction_version": self.settings.transactions.transaction_version,
                "nodes": nodes, "proxy": proxy, "workloads": workloads}

    @property
    def _proxy_marker(self) -> str:
        return f"--lab-dir={self.state.lab_dir}"

    # -- clients --------------------------------------------------------------------------------

    def admin(self, **overrides: Any) -> Any:
        from txnwatch.lab.wire import admin_client

        return admin_client(self.bootstrap_servers, **overrides)

    def leader_of(self, topic: str, partition: int) -> int:
        from txnwatch.lab.wire import partition_leaders

        admin = self.admin()
        try:
            return partition_leaders(admin, topic)[partition]
        finally:
            admin.close()

    def transaction_coordinator(self, transactional_id: str) -> int:
        from txnwatch.lab.wire import find_transaction_coordinator

        admin = self.admin()
        try:
            return find_transaction_coordinator(admin, transactional_id)
        finally:
            admin.close()

    # -- broker lifecycle (faults) --------------------------------------------------------------

    def stop_broker(self, node_id: int, *, kill: bool = False, timeout: float = 30.0) -> None:
        """SIGTERM (controlled shutdown: leadership moves away first) or, with `kill`, SIGKILL (a crash)."""
        n = self.node(node_id)
        if n.pid is not None:
            stop({n.pid: n.config_file}, timeout=timeout, kill=kill, children=self._children)
            self._children.pop(n.pid, None)

    def start_broker(self, node_id: int, *, wait: bool = True, timeout: float = 60.0) -> None:
        n = self.node(node_id)
        if self.node_state(node_id) != "dead":
            raise LabError(f"node {node_id} is still running (pid {n.pid})")
        proc = spawn(_java_cmd(self.settings, self.lab_dir, Path(n.config_file), n),
                     Path(n.log_file), Path(n.config_file).parent, die_with_parent=self._die_with_parent)
        self._children[proc.pid] = proc
        n.pid = proc.pid
        self.state.save()
        if wait:
            _wait_ports([n], self, time.monotonic() + timeout)
            if n.is_broker:
                _wait_registered(self, {n.node_id}, time.monotonic() + timeout)
                _wait_ports([n], self, time.monotonic() + timeout, clients=True)

    def restart_broker(self, node_id: int, *, kill: bool = False) -> None:
        self.stop_broker(node_id, kill=kill)
        self.start_broker(node_id)

    def freeze_broker(self, node_id: int) -> None:
        """SIGSTOP: the process keeps its sockets open but answers nothing, like a long GC pause or a hung disk."""
        n = self.node(node_id)
        if not signal_if_ours(n.pid, n.config_file, signal.SIGSTOP, self._children.get(n.pid or 0)):
            raise LabError(f"node {node_id} is not running")

    def thaw_broker(self, node_id: int) -> None:
        n = self.node(node_id)
        if not signal_if_ours(n.pid, n.config_file, signal.SIGCONT, self._children.get(n.pid or 0)):
            raise LabError(f"node {node_id} is not running")

    # -- background workloads -------------------------------------------------------------------

    def _workload_marker(self, scenario: str) -> str:
        return f"workload --scenario {scenario} --dir={self.state.lab_dir}"

    def start_workload_process(self, scenario: str, report_every: float = 10.0) -> int:
        """Run `txnwatch lab workload --scenario S` detached, logging to <lab_dir>/workload-S.log.

        It is recorded in the state file, so `lab down` stops it first and its faults get cleared
        (SIGTERM makes the workload stop gracefully)."""
        if scenario in self.state.workloads and process_state(
                self.state.workloads[scenario], self._workload_marker(scenario)) != "dead":
            raise LabError(f"workload {scenario!r} already runs (pid {self.state.workloads[scenario]})")
        cmd = [sys.executable, "-m", "txnwatch.lab", *self._workload_marker(scenario).split(" "),
               f"--report-every={report_every}"]
        proc = spawn(cmd, self.lab_dir / f"workload-{scenario}.log", self.lab_dir,
                     die_with_parent=self._die_with_parent)
        self._children[proc.pid] = proc
        self.state.workloads[scenario] = proc.pid
        self.state.save()
        return proc.pid

    def stop_workloads(self, timeout: float = 30.0) -> None:
        pids = {pid: self._workload_marker(name) for name, pid in self.state.workloads.items()}
        if pids:
            stop(pids, timeout=timeout, children=self._children)
        self.state.workloads.clear()
        if (self.lab_dir / STATE_FILE).exists():
            self.state.save()

    # -- teardown -------------------------------------------------------------------------------

    def down(self) -> None:
        """Stop exactly the processes recorded for this lab: workloads first (so they can clear
        their faults), then brokers (their controlled shutdown needs the controller), then
        controllers, then the proxy."""
        self.stop_workloads()
        brokers_only = [n for n in self.state.nodes if n.roles == ["broker"]]
        rest = [n for n in self.state.nodes if n.roles != ["broker"]]
        for group in (brokers_only, rest):
            pids = {n.pid: n.config_file for n in group if n.pid}
            if pids:
                stop(pids, timeout=20.0, children=self._children)
        if self.state.proxy_pid:
            stop({self.state.proxy_pid: self._proxy_marker}, timeout=5.0, children=self._children)
        self._children.clear()
        (self.lab_dir / STATE_FILE).unlink(missing_ok=True)

    def __enter__(self) -> LabCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()


# -- startup ----------------------------------------------------------------------------------------


def start_lab(settings: LabSettings | None = None, lab_dir: Path | str | None = None, *,
              die_with_parent: bool = False, quiet: bool = False) -> LabCluster:
    """Format and start a cluster on free ports and wait until it serves transactions.

    `die_with_parent` ties the processes to this Python process (pytest);
    `txnwatch lab up` leaves it off so the cluster outlives the command.
    """
    settings = settings or LabSettings()
    lab_path = Path(lab_dir) if lab_dir else default_lab_dir()
    t0 = time.monotonic()
    say = (lambda m: None) if quiet else _progress
    require_tool("java")
    jars = resolve_kafka_jars(settings.kafka_version, quiet=quiet)
    if settings.jmx_exporter:
        resolve_jmx_exporter(quiet=quiet)
    _prepare_dir(lab_path)
    _write_log_configs(lab_path)

    nodes = _plan_nodes(settings, lab_path)
    cluster_id = new_cluster_id()
    say(f"formatting {len(nodes)} KRaft node(s) for Kafka {settings.kafka_version} in {lab_path}")
    _format(settings, jars, lab_path, nodes, cluster_id)

    children: dict[int, subprocess.Popen[bytes]] = {}
    state = LabState(lab_dir=str(lab_path), kafka_version=settings.kafka_version, cluster_id=cluster_id,
                     bootstrap_servers=",".join(f"127.0.0.1:{n.port}" for n in nodes if n.is_broker),
                     nodes=nodes, settings=asdict(settings))
    lab = LabCluster(state, children, die_with_parent)
    try:
        if settings.proxy:
            _start_proxy(lab, children, die_with_parent)
        for n in sorted(nodes, key=lambda n: n.is_broker):  # controllers first
            proc = spawn(_java_cmd(settings, lab_path, Path(n.config_file), n), Path(n.log_file),
                         Path(n.config_file).parent, die_with_parent=die_with_parent)
            children[proc.pid] = proc
            n.pid = proc.pid
        state.save()
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        say(f"started {len(nodes)} JVM(s); waiting for the brokers to listen")
        _wait_ports(nodes, lab, deadline)
        say("waiting for all brokers to register with the controller")
        _wait_registered(lab, {n.node_id for n in nodes if n.is_broker}, deadline)
        _wait_ports([n for n in nodes if n.is_broker], lab, deadline, clients=True)
        say("creating __transaction_state (first FindCoordinator)")
        _wait_transaction_coordinator(lab, deadline)
    except BaseException:
        lab.down()
        raise
    say(f"cluster up in {time.monotonic() - t0:.1f}s: bootstrap {state.bootstrap_servers}")
    return lab


def new_cluster_id() -> str:
    """A Kafka Uuid in its URL-safe base64 form.  Like Kafka's Uuid.randomUuid, never one starting with
    '-': the storage tool's argument parser would take it for an option."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


_LAB_ENTRIES = ("lab.json", "lab.tmp", "node-*", "log4j*.properties", "proxy.log", "workload-*.log")


def _prepare_dir(lab_path: Path) -> None:
    """Reuse a stopped lab's directory, but never wipe a directory that is not a lab's."""
    if lab_path.exists():
        foreign = [p.name for p in lab_path.iterdir() if not any(p.match(pat) for pat in _LAB_ENTRIES)]
        if foreign:
            raise LabError(f"{lab_path} holds files that are not a lab's ({', '.join(sorted(foreign)[:5])}); "
                           "choose an empty or new --dir")
    if (lab_path / STATE_FILE).exists():
        existing = LabCluster.load(lab_path)
        if any(existing.node_state(n.node_id) != "dead" for n in existing.state.nodes):
            raise LabError(f"a lab is already running in {lab_path}; stop it with `txnwatch lab down --dir {lab_path}`")
        existing.down()
    lab_path.mkdir(parents=True, exist_ok=True)
    for old in lab_path.glob("node-*"):
        shutil.rmtree(old)


def _write_log_configs(lab_path: Path) -> None:
    (lab_path / "log4j2-server.properties").write_text(_LOG4J2.format(target="SYSTEM_OUT", level="info"))
    (lab_path / "log4j2-tools.properties").write_text(_LOG4J2.format(target="SYSTEM_ERR", level="warn"))
    (lab_path / "log4j-server.properties").write_text(_LOG4J1.format(target1="System.out", level="INFO"))
    (lab_path / "log4j-tools.properties").write_text(_LOG4J1.format(target1="System.err", level="WARN"))


def log_opts(lab_path: Path, version: str, kind: str) -> list[str]:
    if kafka_major(version) >= 4:
        return [f"-Dlog4j2.configurationFile={lab_path / f'log4j2-{kind}.properties'}"]
    return [f"-Dlog4j.configuration=file:{lab_path / f'log4j-{kind}.properties'}"]


def _plan_nodes(settings: LabSettings, lab_path: Path) -> list[LabNode]:
    n = settings.brokers
    if settings.combined:
        specs = [(i, ["broker", "controller"]) for i in range(1, n + 1)]
    else:
        specs = [(CONTROLLER_ID, ["controller"])] + [(i, ["broker"]) for i in range(1, n + 1)]
    ports = iter(free_ports(len(specs) * 6))
    planned = []
    metrics_ports = {}
    for node_id, roles in specs:
        broker = "broker" in roles
        client, internal, ctrl, proxied, metrics, krb = (next(ports) for _ in range(6))
        if broker and settings.jmx_exporter:
            metrics_ports[node_id] = metrics
        planned.append(NodePorts(node_id=node_id, client=client if broker else None,
                                 internal=internal if broker else None,
                                 controller=ctrl if "controller" in roles else None,
                                 advertised=(proxied if settings.proxy else client) if broker else None,
                                 kerberos=krb if broker and settings.kerberos else None))
    voters = ",".join(f"{p.node_id}@127.0.0.1:{p.controller}" for p in planned if p.controller)
    nodes = []
    for (node_id, roles), p in zip(specs, planned, strict=False):
        node_dir = lab_path / f"node-{node_id}"
        (node_dir / "data").mkdir(parents=True)
        props = render_properties(settings, p, roles, voters, str(node_dir / "data"))
        config = node_dir / "server.properties"
        config.write_text(format_properties(props))
        nodes.append(LabNode(node_id=node_id, roles=roles, pid=None, config_file=str(config),
                             log_file=str(node_dir / "server.log"), port=p.advertised, broker_port=p.client,
                             internal_port=p.internal, controller_port=p.controller,
                             metrics_port=metrics_ports.get(node_id), kerberos_port=p.kerberos))
    return nodes


def _jvm_base(heap_mb: int) -> list[str]:
    # Serial GC and C1-only JIT: several JVMs share 2 cores, and startup time matters more than peak throughput.
    return [require_tool("java"), "-Xms64m", f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]


def _java_cmd(settings: LabSettings, lab_path: Path, config: Path, node: LabNode) -> list[str]:
    heap = settings.broker_heap_mb if node.is_broker else settings.controller_heap_mb
    jars = resolve_kafka_jars(settings.kafka_version, quiet=True)
    extra = []
    if node.metrics_port:
        extra = [f"-javaagent:{resolve_jmx_exporter(quiet=True)}=127.0.0.1:{node.metrics_port}:{JMX_EXPORTER_CONFIG}"]
    if settings.kerberos is not None and node.is_broker:
        extra.append(f"-Djava.security.krb5.conf={settings.kerberos.krb5_conf}")
    return [*_jvm_base(heap), *extra, *log_opts(lab_path, settings.kafka_version, "server"),
            f"-Dkafka.logs.dir={config.parent}", "-cp", classpath(jars), "kafka.Kafka", str(config)]


def _format(settings: LabSettings, jars: Path, lab_path: Path, nodes: list[LabNode], cluster_id: str) -> None:
    # kafka.tools.StorageTool is the entry point in both 3.9 and 4.1 (checked in the jars).
    # --feature (KIP-1022) exists from 3.9 on; without it Kafka finalizes its own default transaction.version.
    features = []
    if settings.transactions.transaction_version is not None:
        features = ["--feature", f"transaction.version={settings.transactions.transaction_version}"]
    procs = []
    for n in nodes:
        cmd = [*_jvm_base(256), *log_opts(lab_path, settings.kafka_version, "tools"), "-cp",
               classpath(jars), "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", n.config_file,
               *features]
        procs.append((n, subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for n, proc in procs:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise LabError(f"formatting node {n.node_id} failed (exit {proc.returncode}):\n{out[-3000:]}")


def _start_proxy(lab: LabCluster, children: dict[int, subprocess.Popen[bytes]], die_with_parent: bool) -> None:
    (control_port,) = free_ports(1)
    routes = [f"--route={n.node_id}={n.port}:{n.broker_port}" for n in lab.state.nodes if n.is_broker]
    cmd = [sys.executable, "-m", "txnwatch.lab.proxy", f"--control-port={control_port}", *routes,
           lab._proxy_marker]
    proc = spawn(cmd, lab.lab_dir / "proxy.log", lab.lab_dir, die_with_parent=die_with_parent)
    children[proc.pid] = proc
    lab.state.proxy_pid, lab.state.proxy_control_port = proc.pid, control_port


def _check_alive(lab: LabCluster, nodes: list[LabNode]) -> None:
    proxy_pid = lab.state.proxy_pid
    if proxy_pid and process_state(proxy_pid, lab._proxy_marker, lab._children.get(proxy_pid)) == "dead":
        log = lab.lab_dir / "proxy.log"
        raise LabError(f"the lab's TCP proxy exited; see {log}:\n{log.read_text(errors='replace')[-2000:]}")
    for n in nodes:
        if lab.node_state(n.node_id) == "dead":
            tail = Path(n.log_file).read_text(errors="replace")[-4000:] if Path(n.log_file).exists() else ""
            raise LabError(f"Kafka node {n.node_id} exited during startup; last log lines of {n.log_file}:\n{tail}")


def _wait_ports(nodes: list[LabNode], lab: LabCluster, deadline: float, *, clients: bool = False) -> None:
    """`clients`: wait for the port clients use instead of the node's own, i.e. for the proxy, which
    listens for a broker only once it has seen that broker listen (and is a poll behind it)."""
    waiting = list(nodes)
    while waiting:
        _check_alive(lab, waiting)
        waiting = [n for n in waiting
                   if not port_open((n.port if clients else n.broker_port) or n.controller_port or 0)]
        if waiting and time.monotonic() > deadline:
            what = "their client ports (see proxy.log)" if clients else "their ports (see their server.log)"
            raise LabError(f"nodes {[n.node_id for n in waiting]} did not open {what}")
        if waiting:
            time.sleep(0.25)


def _wait_registered(lab: LabCluster, broker_ids: set[int], deadline: float) -> None:
    """Wait until the brokers are unfenced: they then appear in Metadata responses."""
    from kafka.errors import KafkaError

    last: Exception | str = "no answer"
    while time.monotonic() < deadline:
        _check_alive(lab, lab.brokers)
        try:
            admin = lab.admin(bootstrap_timeout_ms=5_000)
        except KafkaError as exc:
            last = exc
            time.sleep(0.5)
            continue
        try:
            while time.monotonic() < deadline:
                seen = {b["broker_id"] for b in admin.describe_cluster()["brokers"] if not b.get("is_fenced")}
                if broker_ids <= seen:
                    return
                last = f"registered brokers {sorted(seen)}"
                time.sleep(0.3)
        except KafkaError as exc:
            last = exc
        finally:
            admin.close()
    raise LabError(f"brokers {sorted(broker_ids)} did not all register in time ({last})")


def _wait_transaction_coordinator(lab: LabCluster, deadline: float) -> None:
    from kafka.errors import KafkaError

    from txnwatch.lab.wire import find_transaction_coordinator

    admin = lab.admin()
    last: Exception | None = None
    try:
        while time.monotonic() < deadline:
            try:
                find_transaction_coordinator(admin, "txnwatch-lab-warmup")
                return
            except KafkaError as exc:
                last = exc
                time.sleep(0.3)
    finally:
        admin.close()
    raise LabError(f"transaction coordinator not available in time ({last})")
