"""SASL/GSSAPI end to end: a real MIT KDC, a lab broker whose client listener takes Kerberos only, and txnwatch
logging in with its own keytab.

The KDC (tests/fixtures/kdc.py) is a realm of its own; the broker (one combined node of the lab, its
``KERBEROS`` listener GSSAPI-only, txnwatch.lab.settings.KerberosListener) logs in as kafka/localhost from its
keytab. txnwatch and a kafka-python transactional producer log in from two keytabs as two principals, in one
process (txnwatch.kafka.kerberos.KerberosIdentity), and the KDC's own log says who got which ticket. The
failures an operator meets (a principal the keytab lacks or the KDC does not know, a key changed since the keytab
was exported, an expired ticket cache, an unreachable KDC, a wrong broker service name) are each one line that
says what to change, and the daemon recovers once it is changed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaProducer

from tests.fixtures.daemon import start_daemon, wait_for
from tests.fixtures.kdc import Kdc, kdc
from txnwatch.kafka import ClusterConnection, ClusterConnectionSettings, ClusterUnreachable
from txnwatch.kafka.kerberos import KerberosIdentity
from txnwatch.lab.cluster import LabCluster, start_lab
from txnwatch.lab.settings import LAB_TRANSACTION_MAX_TIMEOUT_MS, KerberosListener, LabSettings, TransactionSettings
from txnwatch.lab.topics import create_topic

pytestmark = [pytest.mark.lab, pytest.mark.slow]
_ = kdc  # the session's KDC fixture, imported so that this module also runs with --noconftest


@dataclass(frozen=True)
class KerberosLab:
    kdc: Kdc
    lab: LabCluster
    bootstrap: str
    txnwatch: str
    keytab: Path
    producer: str
    producer_keytab: Path
    topic: str

    def settings(self, **changes: Any) -> ClusterConnectionSettings:
        """txnwatch's own login to the Kerberos listener."""
        base = ClusterConnectionSettings(
            name="krb", bootstrap_servers=(self.bootstrap,), security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="GSSAPI", sasl_kerberos_principal=self.txnwatch, sasl_kerberos_keytab=str(self.keytab))
        return replace(base, **changes)


@pytest.fixture(scope="module")
def krb(kdc: Kdc, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KerberosLab]:
    root = tmp_path_factory.mktemp("kerberos")
    broker = kdc.add_principal("kafka/localhost")
    me, producer = kdc.add_principal("txnwatch"), kdc.add_principal("orders-producer")
    with pytest.MonkeyPatch.context() as env:
        # MIT krb5 reads KRB5_CONFIG whenever it makes a context: txnwatch and the producer run in this process.
        env.setenv("KRB5_CONFIG", str(kdc.krb5_conf))
        lab = start_lab(LabSettings(
            brokers=1, combined=True, proxy=False,
            transactions=TransactionSettings(max_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS),
            kerberos=KerberosListener(krb5_conf=str(kdc.krb5_conf), keytab=str(kdc.keytab(root / "kafka.keytab", broker)),
                                      principal=broker)), root / "lab", die_with_parent=True)
        try:
            admin = lab.admin()  # the lab's own PLAINTEXT listener
            try:
                create_topic(admin, "krb-orders", 1, 1)
            finally:
                admin.close()
            assert lab.kerberos_bootstrap_servers is not None
            yield KerberosLab(kdc, lab, lab.kerberos_bootstrap_servers, me, kdc.keytab(root / "txnwatch.keytab", me),
                              producer, kdc.keytab(root / "producer.keytab", producer), "krb-orders")
        finally:
            lab.down()


def _refusal(settings: ClusterConnectionSettings) -> str:
    with ClusterConnection(settings) as connection, pytest.raises(ClusterUnreachable) as refused:
        connection.poll()
    return str(refused.value)


def _cluster(daemon: Any) -> dict[str, Any]:
    (cluster,) = [c for c in daemon.get("/api/v1/clusters").json() if c["name"] == "krb"]
    return dict(cluster)


def test_daemon_watches_a_kerberos_only_listener_with_its_own_keytab(
        krb: KerberosLab, sqlite_url: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The daemon starts with a keytab whose key the KDC has since changed: its cluster says so in one line and
    stays down; once the new key is exported into the same file it logs in, and watches a transaction that a
    producer, logged in as another principal from another keytab, opens and commits."""
    rotated = krb.kdc.add_principal("txnwatch-rotated")
    keytab = krb.kdc.keytab(tmp_path / "txnwatch.keytab", rotated)
    krb.kdc.kadmin(f"cpw -randkey {rotated}")  # the keytab now holds the old key only
    daemon = start_daemon(database_url=sqlite_url, poll_interval_seconds=1, clusters=[dict(
        name="krb", bootstrap_servers=krb.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
        sasl_kerberos_principal=rotated, sasl_kerberos_keytab=str(keytab))])
    producer: Any = None
    try:
        down = wait_for(lambda: (c := _cluster(daemon))["last_error"] and c, 60, what="the failed login's line")
        assert not down["up"] and "\n" not in down["last_error"], down
        assert f"login as {rotated} failed: the KDC refused the key of {rotated} in the keytab {keytab}" \
            in down["last_error"] and "export it again (kadmin ktadd)" in down["last_error"], down["last_error"]
        krb.kdc.keytab(keytab, rotated)  # the operator's fix: the principal's current key into the same file
        wait_for(lambda: _cluster(daemon)["up"], 60, what="the cluster up once the keytab holds the new key")

        producer = KafkaProducer(
            bootstrap_servers=krb.bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
            transactional_id="krb-orders-1", transaction_timeout_ms=LAB_TRANSACTION_MAX_TIMEOUT_MS,
            sasl_oauth_token_provider=KerberosIdentity(principal=krb.producer, keytab=str(krb.producer_keytab)))
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(krb.topic, b"paid").get(timeout=30)
        path = "/api/v1/transactions/krb/krb-orders-1"
        ongoing = wait_for(lambda: (r := daemon.get(path)).status_code == 200 and r.json()["state"] == "Ongoing"
                           and r.json(), 30, what="the open transaction")
        assert ongoing["partitions"] == ["krb-orders-0"], ongoing
        producer.commit_transaction()
        wait_for(lambda: daemon.get(path).json()["state"] == "CompleteCommit", 30, what="the committed transaction")
        # The transaction-log tail's consumer logs in the same way: history comes from __transaction_state.
        wait_for(lambda: _cluster(daemon)["history_mode"] == "exact", 30, what="the exact history mode")
    finally:
        if producer is not None:
            producer.close(timeout=5)
        daemon.stop()
    logged = [r for r in caplog.records if "the KDC refused the key" in r.getMessage()]
    assert logged and all(r.exc_info is None for r in logged), "the failed login is logged, without a traceback"
    # The KDC's word for who logged in: txnwatch with its own (new) key, the producer as itself.
    broker = krb.kdc.principal("kafka/localhost")
    assert {(rotated, broker), (krb.producer, broker)} <= set(krb.kdc.issued())


#: How a test breaks the login: changes to the cluster's settings (and to the process's environment).
Setup = Callable[[KerberosLab, Path, pytest.MonkeyPatch], dict[str, Any]]


def _expired_ticket_cache(krb: KerberosLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A ticket cache kinit filled for a principal whose tickets live 2 s, waited out: no keytab to renew it."""
    brief = krb.kdc.add_principal("txnwatch-brief", maxlife="2 seconds")
    cache = f"FILE:{tmp_path / 'ccache'}"
    krb.kdc.kinit(brief, krb.kdc.keytab(tmp_path / "brief.keytab", brief), cache)
    monkeypatch.setenv("KRB5CCNAME", cache)
    # Past its end time by more than the second MIT counts in: in that second the KDC still hands out a service
    # ticket (it allows its clock skew on the ticket-granting ticket) ending then, and the login goes through.
    import gssapi

    end = time.time() + gssapi.Credentials(usage="initiate", store={"ccache": cache}).lifetime
    wait_for(lambda: time.time() > end + 2, 10, interval=0.2, what="the ticket's end time to pass")
    return dict(sasl_kerberos_principal=brief, sasl_kerberos_keytab=None)


def _expired(ccache: str) -> bool:
    """Expired as MIT sees the cache (it then gets new tickets from a keytab)."""
    import gssapi

    try:
        gssapi.Credentials(usage="initiate", store={"ccache": ccache}).lifetime  # noqa: B018  # raises once expired
    except gssapi.exceptions.ExpiredCredentialsError:
        return True
    return False


def _changed_in_the_kdc(name: str, query: str) -> Setup:
    """A principal whose key is exported into a keytab, then changed in the KDC by the kadmin ``query``."""
    def setup(krb: KerberosLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
        principal = krb.kdc.add_principal(name)
        keytab = krb.kdc.keytab(tmp_path / f"{name}.keytab", principal)
        krb.kdc.kadmin(f"{query} {principal}")
        return dict(sasl_kerberos_principal=principal, sasl_kerberos_keytab=str(keytab))
    return setup


def _kdc_down(krb: KerberosLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """krb5.conf naming a port where no KDC listens (the realm's KDC unreachable from here)."""
    conf = tmp_path / "krb5.conf"
    conf.write_text(re.sub(r"kdc = 127\.0\.0\.1:\d+", "kdc = 127.0.0.1:9", krb.kdc.krb5_conf.read_text()))
    monkeypatch.setenv("KRB5_CONFIG", str(conf))
    return {}


def _keytab_removed(krb: KerberosLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The configured keytab deleted after the start (config check had found it)."""
    return dict(sasl_kerberos_keytab=str(tmp_path / "unmounted.keytab"))


R = "@TXNWATCH.TEST"

# (how the login is broken, what the line must say: what is wrong and what to change)
FAILURES = [
    pytest.param(lambda k, t, m: dict(sasl_kerberos_principal=f"nobody{R}"),
                 ["holds no key for nobody" + R, "check sasl_kerberos_principal against `klist -k"],
                 id="principal-not-in-the-keytab"),
    pytest.param(_changed_in_the_kdc("txnwatch-gone", "delprinc -force"),
                 ["the KDC knows no principal txnwatch-gone" + R, "check sasl_kerberos_principal"],
                 id="principal-unknown-to-the-kdc"),
    pytest.param(_changed_in_the_kdc("txnwatch-stale", "cpw -randkey"),
                 ["the KDC refused the key of txnwatch-stale" + R, "export it again (kadmin ktadd)"],
                 id="key-changed-since-the-keytab-was-exported"),
    pytest.param(_expired_ticket_cache, [f"the ticket of txnwatch-brief{R} in the credential cache (KRB5CCNAME) has "
                                         "expired", "renew it (kinit, k5start), or set sasl_kerberos_keytab"],
                 id="expired-ticket-cache"),
    pytest.param(_changed_in_the_kdc("txnwatch-retired", "modprinc -expire yesterday"),
                 ["the principal txnwatch-retired" + R + " has expired or is locked"], id="principal-expired"),
    pytest.param(_changed_in_the_kdc("txnwatch-old-key", "modprinc -pwexpire yesterday"),
                 ["the key (password) of txnwatch-old-key" + R + " has expired"], id="key-expired"),
    pytest.param(_kdc_down, ["no KDC of the realm answered", "check the realm's kdc entries in krb5.conf"],
                 id="kdc-unreachable"),
    pytest.param(_keytab_removed, ["sasl_kerberos_keytab: cannot read", "No such file or directory"],
                 id="keytab-gone-since-the-start"),
    pytest.param(lambda k, t, m: dict(sasl_kerberos_service_name="kafka-prod"),
                 ["the KDC knows no broker principal kafka-prod/localhost", "check sasl_kerberos_service_name"],
                 id="wrong-broker-service-name"),
]


@pytest.mark.parametrize(("breaks", "says"), FAILURES)
def test_a_failed_login_is_one_line_saying_what_to_change(
        krb: KerberosLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, breaks: Setup, says: list[str]) -> None:
    # The login fails before a byte of it is sent: a second to bootstrap is plenty even on a loaded machine.
    line = _refusal(krb.settings(connect_timeout_ms=1_000, **breaks(krb, tmp_path, monkeypatch)))
    assert "\n" not in line and "Traceback" not in line, line
    assert "(sasl_mechanism GSSAPI: login as " in line and all(part in line for part in says), line


def test_a_keytab_login_outlives_its_tickets(krb: KerberosLab, tmp_path: Path) -> None:
    """Tickets of 2 s: a connection made after they ran out logs in again from the keytab, by itself."""
    short = krb.kdc.add_principal("txnwatch-short", maxlife="2 seconds")
    settings = krb.settings(sasl_kerberos_principal=short,
                            sasl_kerberos_keytab=str(krb.kdc.keytab(tmp_path / "short.keytab", short)))
    identity = settings.sasl_provider
    assert isinstance(identity, KerberosIdentity)
    with ClusterConnection(settings) as connection:
        assert connection.poll().errors == ()

    wait_for(lambda: _expired(identity.ccache), 10, interval=0.2, what="the cluster's tickets to run out")
    def logins() -> int:  # initial tickets (AS exchanges) the KDC issued to the principal
        return sum(1 for client, server in krb.kdc.issued() if client == short and server.startswith("krbtgt/"))

    before = logins()
    with ClusterConnection(settings) as connection:  # the same identity: the same ticket cache, its tickets expired
        assert connection.poll().errors == ()
    assert logins() > before
