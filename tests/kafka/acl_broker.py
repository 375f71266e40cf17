"""A single-node Kafka with an authorizer, for tests of what txnwatch does where ACLs deny it.

Clients authenticate with SASL PLAIN (``WATCHER`` is txnwatch's principal); the
broker's own listeners are PLAINTEXT (User:ANONYMOUS, a super user), and ``admin()``
uses them to add or remove ACLs.  ``allow.everyone.if.no.acl.found`` keeps every
resource without ACLs open, so one DENY is all a test needs.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kafka.admin import KafkaAdminClient

from tests.fixtures.daemon import terminate
from tests.kafka.secure_broker import _free_ports, _wait_for_port
from txnwatch.lab.jars import classpath, resolve_kafka_jars

WATCHER = ("watcher", "watcher-secret")


@dataclass(frozen=True)
class AclBroker:
    sasl_bootstrap: str
    internal_bootstrap: str

    def admin(self) -> KafkaAdminClient:
        return KafkaAdminClient(bootstrap_servers=self.internal_bootstrap, client_id="acl-test-admin")


def _properties(directory: Path, sasl: int, internal: int, controller: int) -> str:
    user, password = WATCHER
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
        (f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl},INTERNAL://127.0.0.1:{internal},"
         f"CONTROLLER://127.0.0.1:{controller}"),
        f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{sasl},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "controller.listener.names=CONTROLLER",
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users=User:ANONYMOUS",
        "allow.everyone.if.no.acl.found=true",
        "sasl.enabled.mechanisms=PLAIN",
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config="
         f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}="{password}";'),
        f"log.dirs={directory / 'data'}",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "transaction.state.log.num.partitions=4",
        "group.initial.rebalance.delay.ms=0",
        "",
    ])


@contextmanager
def acl_broker(directory: Path, kafka_version: str = "4.1.1") -> Iterator[AclBroker]:
    cp = classpath(resolve_kafka_jars(kafka_version, quiet=True))
    sasl, internal, controller = _free_ports(3)
    config = directory / "server.properties"
    config.write_text(_properties(directory, sasl, internal, controller))
    cluster_id = subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "random-uuid"],
                                check=True, capture_output=True, text=True).stdout.strip()
    subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config),
                    "--standalone"], check=True, capture_output=True)
    with open(directory / "broker.log", "wb") as log:
        process = subprocess.Popen(["java", "-Xmx384m", "-cp", cp, "kafka.Kafka", str(config)],
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(process, sasl, directory)
        yield AclBroker(sasl_bootstrap=f"127.0.0.1:{sasl}", internal_bootstrap=f"127.0.0.1:{internal}")
    finally:
        terminate(process, timeout=20)
