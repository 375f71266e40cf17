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

#: `transaction.max.timeout.ms` of the pytest Kafka 4 lab (`kafka4_lab`): what is found there is an ongoing
#: transaction, aborted by id or compared with Kafka's tools (several JVM starts), never one left to the
#: coordinator's timeout, so it must outlive those steps on a loaded machine; 15 s did not.
KAFKA4_LAB_TRANSACTION_MAX_TIMEOUT_MS = 60_000

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
class KerberosListener:
    """A ``KERBEROS`` listener on every broker: SASL_PLAINTEXT with GSSAPI as its only mechanism.

    The lab's own PLAINTEXT listener stays (the lab's readiness checks, topics and Kafka's reference tools use
    it) and so does the PLAINTEXT inter-broker one; a client of the Kerberos listener is told only that
    listener's addresses, so it stays on Kerberos.  The KDC is not the lab's: the caller brings its
    ``krb5.conf`` and a keytab holding the brokers' principal (tests/fixtures/kdc.py makes both).

    The listener binds 127.0.0.1 and advertises the name ``localhost``, and the brokers' principal is
    ``kafka/localhost@REALM``: a Java client names the broker's principal after the host name of the address it
    connected to (Kafka's SaslChannelBuilder: ``InetAddress.getHostName()``), which for an address given as
    127.0.0.1 is a reverse lookup (``localhost`` from /etc/hosts), while kafka-python (MIT krb5) takes the host
    as advertised.  Advertised as a name, both ask for ``kafka/localhost`` with no lookup at all.  The broker's
    JVM reads the realm from ``-Djava.security.krb5.conf`` (Java does not read KRB5_CONFIG) and logs in with
    Java's Krb5LoginModule from the keytab."""

    krb5_conf: str
    keytab: str
    #: The brokers' principal, kafka/localhost@REALM; its first part is the service name.
    principal: str
    #: The host name the listener advertises (and the principal's second part).
    host: str = "localhost"

    def __post_init__(self) -> None:
        service, _, rest = self.principal.partition("/")
        if not service or rest.partition("@")[0] != self.host:
            raise ValueError(f"the brokers' principal must be <service>/{self.host}@REALM, not {self.principal!r}")

    @property
    def service_name(self) -> str:
        return self.principal.split("/", 1)[0]

    def jaas(self) -> str:
        """A JAAS login from the keytab; storeKey keeps the key, which the broker needs to accept tickets."""
        return ("com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
                f'keyTab="{self.keytab}" principal="{self.principal}";')


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
    #: A GSSAPI-only listener beside the PLAINTEXT one (`LabCluster.kerberos_bootstrap_servers`).
    kerberos: KerberosListener | None = None

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
    #: The GSSAPI listener's port (brokers of a lab with `kerberos`); never proxied.
    kerberos: int | None = None


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
        advertised = [f"CLIENT://127.0.0.1:{node.advertised}", f"INTERNAL://127.0.0.1:{node.internal}"]
        krb = settings.kerberos
        if krb is not None:
            listeners.append(f"KERBEROS://127.0.0.1:{node.kerberos}")
            advertised.append(f"KERBEROS://{krb.host}:{node.kerberos}")
            props.update({
                "listener.security.protocol.map": props["listener.security.protocol.map"]
                + ",KERBEROS:SASL_PLAINTEXT",
                "listener.name.kerberos.sasl.enabled.mechanisms": "GSSAPI",
                "listener.name.kerberos.gssapi.sasl.jaas.config": krb.jaas(),
                "sasl.kerberos.service.name": krb.service_name,
            })
        tx = settings.transactions
        props.update({
            "advertised.listeners": ",".join(advertised),
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
