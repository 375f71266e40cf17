"""A single-node Kafka with SASL (PLAIN, SCRAM-SHA-256/512) and mutual-TLS listeners, for the tests only.

The lab runs PLAINTEXT clusters; authenticated listeners need their own broker,
certificates (made with the ``openssl`` command) and SCRAM users written at format time.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures.daemon import terminate
from txnwatch.lab.jars import classpath, resolve_kafka_jars

USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret"),
         "SCRAM-SHA-512": ("carol", "carol-secret")}
# A PLAIN user whose password holds every character that broke the Helm chart's JSON splice.
HOSTILE_PLAIN = ("mallory", "\"\\{}$'" + "ü€😀 \\u0022 $(HOME) ,=]")


def _jaas_quoted(value: str) -> str:
    """A JAAS option value (Kafka's JaasConfig reads it with a StreamTokenizer: backslash escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _properties_escaped(value: str) -> str:
    """server.properties is read as ISO-8859-1 with backslash escapes: escape those, \\uXXXX the rest."""
    out = []
    for ch in value.replace("\\", "\\\\"):
        if 0x20 <= ord(ch) < 0x7F:
            out.append(ch)
        else:
            out.extend(f"\\u{unit:04x}" for unit in
                       (int.from_bytes(ch.encode("utf-16-be")[i:i + 2], "big") for i in range(0, len(ch.encode("utf-16-be")), 2)))
    return "".join(out)


@dataclass(frozen=True)
class SecureBroker:
    sasl_bootstrap: str
    ssl_bootstrap: str
    ca: Path
    client_cert: Path
    client_key: Path


def _free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _certificates(directory: Path) -> None:
    """A CA, and a server and a client certificate it signed, all for 127.0.0.1."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / "ca.key"),
             "-out", str(directory / "ca.pem"), "-days", "2", "-subj", "/CN=txnwatch-test-ca")
    (directory / "san.cnf").write_text("subjectAltName=IP:127.0.0.1\n")
    for name in ("server", "client"):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(directory / f"{name}.key"),
                 "-out", str(directory / f"{name}.csr"), "-subj", "/CN=127.0.0.1")
        _openssl("x509", "-req", "-in", str(directory / f"{name}.csr"), "-CA", str(directory / "ca.pem"),
                 "-CAkey", str(directory / "ca.key"), "-CAcreateserial", "-out", str(directory / f"{name}.crt"),
                 "-days", "2", "-extfile", str(directory / "san.cnf"))
    _openssl("pkcs8", "-topk8", "-nocrypt", "-in", str(directory / "server.key"), "-out", str(directory / "server.p8"))
    (directory / "server-keystore.pem").write_text(
        (directory / "server.p8").read_text() + (directory / "server.crt").read_text())


def _properties(directory: Path, sasl: int, ssl: int, internal: int, controller: int) -> str:
    plain_users = " ".join(f"user_{u}={_jaas_quoted(p)}" for u, p in [USERS["PLAIN"], HOSTILE_PLAIN])
    return "\n".join([
        "process.roles=broker,controller",
        "node.id=1",
        f"controller.quorum.bootstrap.servers=127.0.0.1:{controller}",
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{ssl},"
        f"INTERNAL://127.0.0.1:{internal},CONTROLLER://127.0.0.1:{controller}",
        f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{sasl},SSL://127.0.0.1:{ssl},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
        "controller.listener.names=CONTROLLER",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config="
        + _properties_escaped(f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain_users};"),
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config="
        "org.apache.kafka.common.security.scram.ScramLoginModule required;",
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={directory / 'server-keystore.pem'}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={directory / 'ca.pem'}",
        "ssl.client.auth=required",
        f"log.dirs={directory / 'data'}",
        "offsets.topic.replication.factor=1",
        "transaction.state.log.replication.factor=1",
        "transaction.state.log.min.isr=1",
        "",
    ])


def _wait_for_port(process: subprocess.Popen[bytes], port: int, directory: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"test broker did not start; see {directory / 'broker.log'}") from None
            time.sleep(0.3)


@contextmanager
def secure_broker(directory: Path, kafka_version: str = "4.1.1", *, oauth_properties: Sequence[str] = (),
                  jvm_options: Sequence[str] = ()) -> Iterator[SecureBroker]:
    """``oauth_properties`` (from tests.kafka.oauth_broker) add OAUTHBEARER to the SASL listener."""
    if shutil.which("java") is None or shutil.which("openssl") is None:
        raise RuntimeError("needs java and openssl")
    cp = classpath(resolve_kafka_jars(kafka_version, quiet=True))
    _certificates(directory)
    sasl, ssl, internal, controller = _free_ports(4)
    config = directory / "server.properties"
    properties = _properties(directory, sasl, ssl, internal, controller)
    if oauth_properties:
        properties = properties.replace("sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                                        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER")
        properties += "\n".join(oauth_properties) + "\n"
    config.write_text(properties)
    cluster_id = subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "random-uuid"],
                                check=True, capture_output=True, text=True).stdout.strip()
    scram = [arg for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512")
             for arg in ("--add-scram", f"{mech}=[name={USERS[mech][0]},password={USERS[mech][1]}]")]
    subprocess.run(["java", "-cp", cp, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(config),
                    "--standalone", *scram], check=True, capture_output=True)
    with open(directory / "broker.log", "wb") as log:
        process = subprocess.Popen(["java", "-Xmx384m", *jvm_options, "-cp", cp, "kafka.Kafka", str(config)],
                                   stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_for_port(process, sasl, directory)
        yield SecureBroker(sasl_bootstrap=f"127.0.0.1:{sasl}", ssl_bootstrap=f"127.0.0.1:{ssl}",
                           ca=directory / "ca.pem", client_cert=directory / "client.crt",
                           client_key=directory / "client.key")
    finally:
        terminate(process, timeout=20)
