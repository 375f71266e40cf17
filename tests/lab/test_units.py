"""Lab plumbing that needs no Kafka: broker properties, ids, the jar cache, the TCP proxy, process checks."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from typing import Any

import pytest

from txnwatch.lab import jars
from txnwatch.lab.cluster import new_cluster_id
from txnwatch.lab.processes import process_state
from txnwatch.lab.proxy import Proxy, ProxyControl, ProxyRoute
from txnwatch.lab.settings import (
    PRE_KIP_890,
    KerberosListener,
    LabSettings,
    NodePorts,
    TransactionSettings,
    render_properties,
)


def _broker_props(settings: LabSettings) -> dict[str, str]:
    node = NodePorts(node_id=1, client=9001, internal=9002, controller=None, advertised=9003)
    return render_properties(settings, node, ["broker"], "0@127.0.0.1:9000", "/data")


@pytest.mark.parametrize(("brokers", "rf", "min_isr"), [(1, "1", "1"), (2, "2", "2"), (3, "3", "2"), (5, "3", "2")])
def test_internal_topics_fit_the_broker_count(brokers, rf, min_isr):
    props = _broker_props(LabSettings(brokers=brokers))
    assert props["offsets.topic.replication.factor"] == props["transaction.state.log.replication.factor"] == rf
    assert props["transaction.state.log.min.isr"] == min_isr
    assert props["default.replication.factor"] == rf


def test_clients_are_told_the_proxy_port_and_replication_stays_direct():
    props = _broker_props(LabSettings())
    assert props["listeners"] == "CLIENT://127.0.0.1:9001,INTERNAL://127.0.0.1:9002"
    assert props["advertised.listeners"] == "CLIENT://127.0.0.1:9003,INTERNAL://127.0.0.1:9002"
    assert props["inter.broker.listener.name"] == "INTERNAL"


def test_transaction_settings_are_configurable():
    tx = TransactionSettings(max_timeout_ms=20_000, partition_verification_enable=False,
                             extra={"transactional.id.expiration.ms": "60000"})
    props = _broker_props(LabSettings(transactions=tx))
    assert props["transaction.max.timeout.ms"] == "20000"
    assert props["transaction.partition.verification.enable"] == "false"
    assert props["transactional.id.expiration.ms"] == "60000"


def test_default_lab_is_kafkas_default_and_pre_kip_890_is_explicit():
    assert _broker_props(LabSettings())["transaction.partition.verification.enable"] == "true"
    assert LabSettings().transactions.transaction_version is None  # Kafka's own default at format time
    assert not LabSettings().transactions.pre_kip_890
    pre = _broker_props(LabSettings(transactions=PRE_KIP_890))
    assert pre["transaction.partition.verification.enable"] == "false" and PRE_KIP_890.pre_kip_890
    assert _broker_props(LabSettings())["group.initial.rebalance.delay.ms"] == "0"


def test_a_kerberos_listener_takes_gssapi_only_and_keeps_the_lab_s_own_listeners():
    krb = KerberosListener(krb5_conf="/k/krb5.conf", keytab="/k/kafka.keytab", principal="kafka/localhost@LAB.TEST")
    node = NodePorts(node_id=1, client=9001, internal=9002, controller=None, advertised=9003, kerberos=9004)
    props = render_properties(LabSettings(kerberos=krb), node, ["broker"], "0@127.0.0.1:9000", "/data")
    assert props["listeners"] == "CLIENT://127.0.0.1:9001,INTERNAL://127.0.0.1:9002,KERBEROS://127.0.0.1:9004"
    # Advertised by name: a Java client names the broker's principal after the host it was told.
    assert props["advertised.listeners"].endswith(",KERBEROS://localhost:9004")
    assert props["listener.security.protocol.map"].endswith(",KERBEROS:SASL_PLAINTEXT")
    assert props["listener.name.kerberos.sasl.enabled.mechanisms"] == "GSSAPI"
    assert props["listener.name.kerberos.gssapi.sasl.jaas.config"] == (
        "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true storeKey=true "
        'keyTab="/k/kafka.keytab" principal="kafka/localhost@LAB.TEST";')
    assert props["sasl.kerberos.service.name"] == "kafka" and props["inter.broker.listener.name"] == "INTERNAL"
    assert "sasl.enabled.mechanisms" not in props  # no other listener takes SASL
    assert "KERBEROS" not in _broker_props(LabSettings())["listeners"]


@pytest.mark.parametrize("principal", [
    pytest.param("kafka/127.0.0.1@LAB.TEST", id="host-not-the-advertised-name"),
    pytest.param("kafka@LAB.TEST", id="no-host-part"),
])
def test_a_kerberos_listener_refuses_a_principal_clients_would_not_ask_for(principal):
    with pytest.raises(ValueError, match=r"must be <service>/localhost@REALM"):
        KerberosListener(krb5_conf="/k/krb5.conf", keytab="/k/kafka.keytab", principal=principal)


def test_heaps_are_capped():
    with pytest.raises(ValueError):
        LabSettings(broker_heap_mb=1024)


def test_cluster_ids_never_look_like_options():
    ids = {new_cluster_id() for _ in range(2000)}
    assert len(ids) == 2000 and not any(i.startswith("-") for i in ids)
    assert all(len(i) == 22 for i in ids)


def test_jar_cache_location_and_reuse(tmp_path, monkeypatch):
    monkeypatch.setenv("TXNWATCH_LAB_CACHE", str(tmp_path / "explicit"))
    assert jars.cache_root() == tmp_path / "explicit"
    monkeypatch.delenv("TXNWATCH_LAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert jars.cache_root() == tmp_path / "xdg" / "txnwatch" / "kafka"
    done = jars.cache_root() / "9.9.9"
    done.mkdir(parents=True)
    (done / ".complete").write_text("9.9.9\n")
    (done / "kafka-tools-9.9.9.jar").write_bytes(b"")  # with its own tools: whole (jars._complete)
    monkeypatch.setenv("PATH", "")  # resolving a cached version must not need Maven
    assert jars.resolve_kafka_jars("9.9.9") == done


def test_missing_maven_names_the_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("TXNWATCH_LAB_CACHE", str(tmp_path))
    monkeypatch.setenv("PATH", "")
    with pytest.raises(jars.ToolMissingError, match="apt-get install openjdk-17-jre-headless maven"):
        jars.resolve_kafka_jars("9.9.8", quiet=True)


def test_process_state_only_recognises_our_marker():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--lab-marker-xyz"])
    try:
        # Right after a vfork-based spawn the kernel may not have published the new cmdline yet.
        deadline = time.monotonic() + 5
        while process_state(proc.pid, "--lab-marker-xyz") != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process_state(proc.pid, "--lab-marker-xyz") == "running"
        assert process_state(proc.pid, "some-other-lab") == "dead"  # a reused pid is not ours
        os.kill(proc.pid, 19)  # SIGSTOP
        time.sleep(0.2)
        assert process_state(proc.pid, "--lab-marker-xyz") == "frozen"
        os.kill(proc.pid, 18)  # SIGCONT
    finally:
        proc.kill()
        proc.wait()
    assert process_state(proc.pid, "--lab-marker-xyz", proc) == "dead"


@pytest.fixture
def echo_behind_proxy():
    """An echo server with the lab proxy in front of it, both on an event loop thread."""
    loop = asyncio.new_event_loop()
    ports: dict[str, int] = {}
    ready = threading.Event()

    async def main() -> None:
        async def echo(reader, writer):
            while data := await reader.read(1024):
                writer.write(data)
                await writer.drain()
            writer.close()

        server = await asyncio.start_server(echo, "127.0.0.1", 0)
        holder["echo"] = server
        ports["echo"] = server.sockets[0].getsockname()[1]
        from txnwatch.lab.ports import free_ports

        ports["listen"], ports["control"] = free_ports(2)
        proxy = Proxy([ProxyRoute(1, ports["listen"], ports["echo"])], ports["control"])
        holder["proxy"] = proxy
        task = asyncio.ensure_future(proxy.serve(install_signal_handlers=False))
        while not (_listening(ports["control"]) and _listening(ports["listen"])):  # noqa: ASYNC110  # polls sockets, not an event
            await asyncio.sleep(0.05)
        ready.set()
        await task
        server.close()
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for other in others:  # connection handlers the proxy has already aborted
            other.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    holder: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: loop.run_until_complete(main()), daemon=True)
    thread.start()
    assert ready.wait(10)
    yield {**ports, "holder": holder}
    loop.call_soon_threadsafe(holder["proxy"].stop)
    thread.join(5)
    loop.close()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
        return True
    except OSError:
        return False


def _round_trip(port: int) -> float:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        start = time.monotonic()
        sock.sendall(b"ping")
        assert sock.recv(16) == b"ping"
        return time.monotonic() - start


def test_proxy_delays_cuts_and_blocks(echo_behind_proxy):
    control = ProxyControl(echo_behind_proxy["control"])
    port = echo_behind_proxy["listen"]
    assert _round_trip(port) < 0.1
    control.delay(1, 150)
    assert _round_trip(port) >= 0.3  # both directions
    control.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"x")
        assert sock.recv(4) == b"x"
        assert control.cut(1, block=True)["cut"] == 1
        assert sock.recv(4) == b""  # our connection was dropped
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"x")
        with pytest.raises(ConnectionResetError):  # and new ones are reset while blocked
            if sock.recv(4) == b"":
                raise ConnectionResetError
    control.clear(1)
    assert _round_trip(port) < 0.1
    assert control.status()["routes"][0]["blocked"] is False


def test_proxy_refuses_connections_while_its_broker_is_down(echo_behind_proxy):
    port = echo_behind_proxy["listen"]
    assert _round_trip(port) < 0.1
    server = echo_behind_proxy["holder"]["echo"]
    server.get_loop().call_soon_threadsafe(server.close)
    deadline = time.monotonic() + 5
    while _listening(port):
        assert time.monotonic() < deadline, "proxy kept listening for a dead broker"
        time.sleep(0.1)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=1)


@pytest.mark.skipif(shutil.which("java") is None, reason="the resolver checks for java before running Maven")
def test_concurrent_resolvers_run_maven_once(tmp_path):
    """Two processes (say, two pytest sessions) asking for the same uncached version: one downloads,
    the other waits on the lock and reuses the result."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    calls = tmp_path / "mvn-calls"
    mvn = fake_bin / "mvn"
    mvn.write_text(f"""#!/bin/sh
echo run >> {calls}
sleep 1
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${{arg#-DoutputDirectory=}}";; esac; done
touch "$out/kafka_2.13-0.0.1.jar" "$out/kafka-clients-0.0.1.jar" "$out/kafka-tools-0.0.1.jar"
""")
    mvn.chmod(0o755)
    env = dict(os.environ, TXNWATCH_LAB_CACHE=str(tmp_path / "cache"), PATH=f"{fake_bin}:{os.environ['PATH']}")
    code = "from txnwatch.lab.jars import resolve_kafka_jars as r; print(r('0.0.1', quiet=True))"
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert outputs[0] == outputs[1] == str(tmp_path / "cache" / "0.0.1")
    assert calls.read_text().count("run") == 1
    assert sorted(p.name for p in (tmp_path / "cache" / "0.0.1").glob("*.jar")) == [
        "kafka-clients-0.0.1.jar", "kafka-tools-0.0.1.jar", "kafka_2.13-0.0.1.jar"]


def test_the_demo_logs_the_lso_stall_fault_by_its_facts_not_a_client_object():
    from txnwatch.lab.faults import LsoStallFault

    class Client:  # stands in for the KafkaProducer: only its default repr matters here
        pass

    fault = LsoStallFault(producer=Client(), transactional_id="txnwatch-demo-stalled",
                          topic="t", partition=1, producer_id=2001, producer_epoch=0, first_offset=12,
                          transaction_timeout_ms=60_000)
    text = repr(fault)
    assert " object at 0x" not in text
    assert "transactional_id='txnwatch-demo-stalled'" in text and "first_offset=12" in text
