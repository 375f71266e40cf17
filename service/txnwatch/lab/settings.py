"""Typed lab settings and the Kafka server.properties they turn into.

Defaults are what a Kafka 4 user runs, on a laptop-sized cluster: partition
verification on (KIP-890, Kafka's default since 3.6), the transaction version
Kafka's storage tool finalizes by default (2 on Kafka 4, so Java 4.x clients
bump the epoch on every commit and abort), internal topics replicated as far as
the broker count allows, and a transaction max timeout small enough that
`kafka-transactions find-hanging` flags an injected hanging transaction within
seconds rather than 15 minutes.

`PRE_KIP_890` is the explicit opposite: verification off, the only setting
under which a hanging transaction can be injected (a transactional batch the
coordinator never heard of is accepted).  The pytest `lab_cluster` fixture and
the `make run` demo use it, `txnwatch lab up --pre-kip-890` asks for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from txnwatch.lab.jars import DEFAULT_KAFKA_VERSION, kafka_major

#: `transaction.max.timeout.ms` of the pytest lab: small, so an LSO stall or a
#: coordinator-side timeout resolves within a test.  Producers in tests must use
#: `transaction.timeout.ms` <= it.
LAB_TRANSACTION_MAX_TIMEOUT_MS = 15_000

#: Default for `txnwatch lab up` and the demo: long enough that an LSO stall
#: outlives the demo's stall threshold and alert `for:` before the coordinator
#: aborts it.
DEFAULT_TRANSACTION_MAX_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class TransactionSettings:
    """Broker-side transaction settings the lab exposes (all `transaction.*` broker configs)."""

    max_timeout_ms: int = DEFAULT_TRANSACTION_MAX_TIMEOUT_MS
    #: Kafka's own default (KIP-890 part 1).  False is the pre-KIP-890 setting hanging-transaction faults need.
    partition_verification_enable: bool = True
    #: `transaction.version` finalized when the storage is formatted; None leaves Kafka's default
    #: (2 on Kafka 4.x, 0 on 3.9, where only transaction version 1 clients exist).
    transaction_version: int | None = None
    #: How often the coordinator looks for timed-out transactions to abort (Kafka's default is 10 s).
    abort_timed_out_check_interval_ms: int = 1_000
    state_log_num_partitions: int = 10
    #: Extra broker properties, e.g. {"transactional.id.expiration.ms": "60000"}.
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def pre_kip_890(self) -> bool:
        return not self.partition_verification_enable


#: Verification off: brokers accept a transactional batch whose partition the coordinator never added, which is
#: how a hanging transaction is injected (and how it happened in production before KIP-890).
PRE_KIP_890 = TransactionSettings(partition_verification_enable=False)


@dataclass(frozen=True)
class LabSettings:
    brokers: int = 3
    kafka_version: str = DEFAULT_KAFKA_VERSION
    #: True: N combined broker+controller nodes; False: one dedicated controller plus N brokers,
    #: so freezing or killing a broker never costs the metadata quorum.
    combined: bool = False
    #: Put a TCP proxy in front of every broker's client listener (latency / cut faults).
    proxy: bool = True
    broker_heap_mb: int = 512
    controller_heap_mb: int = 256
    transactions: TransactionSettings = field(default_factory=TransactionSettings)
    #: Run the Prometheus JMX exporter agent (io.prometheus.jmx) in every broker, as most operators do:
    #: broker metrics, KIP-890's VerificationTimeMs / VerificationFailureRate included, on
    #: http://127.0.0.1:<metrics port>/metrics (`LabCluster.broker_metrics_urls()`).
    jmx_exporter: bool = False

    def __post_init__(self) -> None:
        if self.brokers < 1:
            raise ValueError("a lab needs at least one broker")
        if self.broker_heap_mb > 512 or self.controller_heap_mb > 512:
            raise ValueError("lab heaps are capped at 512 MB per JVM")


@dataclass(frozen=True)
class NodePorts:
    """`client` is where the broker binds; `advertised` is what clients are told (the proxy's port when proxied)."""

    node_id: int
    client: int | None
    internal: int | None
    controller: int | None
    advertised: int | None


def render_properties(
    settings: LabSettings, node: NodePorts, roles: list[str], voters: str, data_dir: str
) -> dict[str, str]:
    n = settings.brokers
    rf = str(min(3, n))
    min_isr = str(min(2, n))
    props: dict[str, str] = {
        "process.roles": ",".join(roles),
        "node.id": str(node.node_id),
        "controller.quorum.voters": voters,
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": data_dir,
    }
    listeners = []
    if "controller" in roles:
        listeners.append(f"CONTROLLER://127.0.0.1:{node.controller}")
    if "broker" in roles:
        listeners += [f"CLIENT://127.0.0.1:{node.client}", f"INTERNAL://127.0.0.1:{node.internal}"]
        tx = settings.transactions
        props.update({
            "advertised.listeners": f"CLIENT://127.0.0.1:{node.advertised},INTERNAL://127.0.0.1:{node.internal}",
            "inter.broker.listener.name": "INTERNAL",
            "num.partitions": "1",
            "default.replication.factor": rf,
            "min.insync.replicas": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "10",
            "group.initial.rebalance.delay.ms": "0",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": str(tx.state_log_num_partitions),
            "transaction.max.timeout.ms": str(tx.max_timeout_ms),
            "transaction.partition.verification.enable": str(tx.partition_verification_enable).lower(),
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": str(tx.abort_timed_out_check_interval_ms),
            # A frozen follower must leave the ISR quickly, or a commit whose
            # __transaction_state write needs it blocks for the 30 s default.
            "replica.lag.time.max.ms": "5000",
            "num.network.threads": "2",
            "num.io.threads": "4",
            "log.flush.interval.messages": "9223372036854775807",
        })
        if kafka_major(settings.kafka_version) >= 4:
            props["share.coordinator.state.topic.replication.factor"] = rf
            props["share.coordinator.state.topic.min.isr"] = "1"
        props.update(tx.extra)
    props["listeners"] = ",".join(listeners)
    return props


def format_properties(props: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in props.items())
