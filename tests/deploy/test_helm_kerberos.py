"""The chart's Kerberos values: each GSSAPI cluster's keytab from a Secret and one krb5.conf, mounted read-only,
KRB5_CONFIG pointing at it, and a rendered config txnwatch loads (its keytab path in the mount)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.test_helm import K8S_VERSION, by_kind, helm
from tests.deploy.tools import CHART, render_chart

KRB5_CONF = "[libdefaults]\n    default_realm = CORP.EXAMPLE\n[realms]\n    CORP.EXAMPLE = {\n        kdc = kdc.corp.example\n    }\n"
KEYTAB_BYTES = b"\x05\x02" + bytes(60)  # what a keytab starts with; config check reads no further


def values(**kerberos: str) -> dict[str, Any]:
    return {
        "config": {"clusters": [
            {"name": "corp", "bootstrap_servers": ["kafka1.corp.example:9094"], "security_protocol": "SASL_SSL",
             "sasl_mechanism": "GSSAPI", "sasl_kerberos_principal": "txnwatch@CORP.EXAMPLE"},
            {"name": "corp-eu", "bootstrap_servers": ["kafka1.eu.corp.example:9094"], "security_protocol": "SASL_SSL",
             "sasl_mechanism": "GSSAPI", "sasl_kerberos_principal": "txnwatch-eu@EU.CORP.EXAMPLE",
             "sasl_kerberos_service_name": "kafka-eu"},
            {"name": "scram", "bootstrap_servers": ["k:9092"], "security_protocol": "SASL_SSL",
             "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "txnwatch"},
        ]},
        "secrets": {"saslPasswords": {"scram": "pw"}},
        "kerberos": {"keytabSecret": "txnwatch-kerberos", **kerberos},
    }


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deploy,) = by_kind(docs, "Deployment")
    return dict(deploy["spec"]["template"]["spec"])


def _kerberos_volume(pod: dict[str, Any]) -> dict[str, Any]:
    (volume,) = [v for v in pod["volumes"] if v["name"] == "kerberos"]
    return dict(volume["projected"])


def test_keytabs_and_krb5_conf_are_mounted_read_only_for_every_container(tmp_path: Path) -> None:
    docs = render_chart(values(krb5Conf=KRB5_CONF), tmp_path)
    for doc in docs:  # the Kubernetes schemas of the chart's Kubernetes version, as tests/deploy/test_helm.py does
        if doc["kind"] not in ("ServiceMonitor", "PrometheusRule"):
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    pod = _pod(docs)
    volume = _kerberos_volume(pod)
    assert volume["defaultMode"] == 0o440
    secret, config_map = volume["sources"]
    assert secret["secret"] == {"name": "txnwatch-kerberos", "items": [
        {"key": "keytab-corp", "path": "keytab-corp"}, {"key": "keytab-corp-eu", "path": "keytab-corp-eu"}]}
    assert config_map["configMap"] == {"name": "rel-txnwatch", "items": [{"key": "krb5.conf", "path": "krb5.conf"}]}
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if "config.yaml" in d["data"]]
    assert cm["data"]["krb5.conf"] == KRB5_CONF
    # The daemon and the SQLite migration init container alike (both load the config, which reads the keytab).
    for container in pod["containers"] + pod["initContainers"]:
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == "kerberos"]
        assert mount == {"name": "kerberos", "mountPath": "/etc/txnwatch/kerberos", "readOnly": True}
        assert {"name": "KRB5_CONFIG", "value": "/etc/txnwatch/kerberos/krb5.conf"} in container["env"]
    clusters = {c["name"]: c for c in yaml.safe_load(cm["data"]["config.yaml"])["clusters"]}
    assert clusters["corp"]["sasl_kerberos_keytab"] == "/etc/txnwatch/kerberos/keytab-corp"
    assert clusters["corp-eu"]["sasl_kerberos_keytab"] == "/etc/txnwatch/kerberos/keytab-corp-eu"
    assert "sasl_password_file" not in clusters["corp"] and "sasl_kerberos_keytab" not in clusters["scram"]
    assert clusters["scram"]["sasl_password_file"] == "/etc/txnwatch/secrets/sasl-password-scram"


def test_rendered_config_loads_with_the_mounted_keytabs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the pod would load: the ConfigMap's config, its keytab paths in the (here materialized) mount."""
    from tests.deploy.tools import localize_paths, materialize_secret_mounts
    from txnwatch.core.config import load_settings

    docs = render_chart(values(krb5Conf=KRB5_CONF), tmp_path)
    pod = _pod(docs)
    mounts = materialize_secret_mounts(docs, pod, pod["containers"][0], tmp_path / "mounts")
    kerberos = tmp_path / "kerberos"  # the operator's Secret: one keytab per GSSAPI cluster
    kerberos.mkdir()
    for name in ("corp", "corp-eu"):
        (kerberos / f"keytab-{name}").write_bytes(KEYTAB_BYTES)
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if "config.yaml" in d["data"]]
    config = tmp_path / "config.yaml"
    config.write_text(localize_paths(cm["data"]["config.yaml"], {**mounts, "/etc/txnwatch/kerberos": kerberos}))
    pytest.importorskip("gssapi", reason="the kerberos extra is not installed (scripts/bootstrap.sh --test)")
    for key in [k for k in __import__("os").environ if k.startswith("TXNWATCH_")]:
        monkeypatch.delenv(key)
    clusters = {c.name: c for c in load_settings(config).clusters}
    assert clusters["corp"].sasl_kerberos_keytab == kerberos / "keytab-corp"
    assert (clusters["corp-eu"].sasl_kerberos_principal, clusters["corp-eu"].sasl_kerberos_service_name) \
        == ("txnwatch-eu@EU.CORP.EXAMPLE", "kafka-eu")


@pytest.mark.parametrize(("kerberos", "source"), [
    pytest.param({"krb5ConfConfigMap": "corp-krb5"}, {"configMap": {"name": "corp-krb5", "items": [
        {"key": "krb5.conf", "path": "krb5.conf"}]}}, id="an-existing-configmap"),
    pytest.param({}, None, id="the-keytab-secret-s-own-key"),
])
def test_krb5_conf_from_a_configmap_or_the_same_secret(kerberos: dict[str, str], source: dict[str, Any] | None,
                                                      tmp_path: Path) -> None:
    docs = render_chart(values(**kerberos), tmp_path)
    sources = _kerberos_volume(_pod(docs))["sources"]
    items = sources[0]["secret"]["items"]
    if source is None:
        assert len(sources) == 1 and items[-1] == {"key": "krb5.conf", "path": "krb5.conf"}
    else:
        assert sources[1:] == [source] and {"key": "krb5.conf", "path": "krb5.conf"} not in items
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if "config.yaml" in d["data"]]
    assert "krb5.conf" not in cm["data"]


def test_without_a_gssapi_cluster_nothing_kerberos_is_rendered(tmp_path: Path) -> None:
    docs = render_chart({"kerberos": {"keytabSecret": "txnwatch-kerberos", "krb5Conf": KRB5_CONF}}, tmp_path)
    pod = _pod(docs)
    assert "kerberos" not in {v["name"] for v in pod["volumes"]}
    assert "KRB5_CONFIG" not in {e["name"] for e in pod["containers"][0]["env"]}


def _cluster(**changes: Any) -> dict[str, Any]:
    """One GSSAPI cluster; a change to None leaves the key out."""
    cluster = {"name": "corp", "bootstrap_servers": ["k:9094"], "security_protocol": "SASL_SSL",
               "sasl_mechanism": "GSSAPI", "sasl_kerberos_principal": "t@CORP", **changes}
    return {"config": {"clusters": [{k: v for k, v in cluster.items() if v is not None}]}}


BAD_KERBEROS_VALUES = [
    pytest.param(_cluster(), "set kerberos.keytabSecret, a Secret with the key keytab-corp", id="no-keytab-secret"),
    pytest.param({**_cluster(sasl_kerberos_principal=None), "kerberos": {"keytabSecret": "k"}},
                 "set config.clusters[corp].sasl_kerberos_principal", id="no-principal"),
    pytest.param({**_cluster(sasl_kerberos_principal="txnwatch"), "kerberos": {"keytabSecret": "k"}},
                 "sasl_kerberos_principal", id="principal-without-realm"),
    pytest.param({**_cluster(sasl_kerberos_keytab="/k.keytab"), "kerberos": {"keytabSecret": "k"}},
                 "sasl_kerberos_keytab must not be set: the chart mounts the key keytab-corp", id="keytab-path-set"),
    pytest.param({**_cluster(), "kerberos": {"keytabSecret": "k", "krb5Conf": "x", "krb5ConfConfigMap": "c"}},
                 "set kerberos.krb5Conf or kerberos.krb5ConfConfigMap, not both", id="two-krb5-confs"),
    pytest.param({"kerberos": {"keytab": "k"}}, "keytab", id="unknown-key"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_KERBEROS_VALUES)
def test_bad_kerberos_values_are_rejected(bad: dict[str, Any], message: str, tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(bad))
    proc = helm("template", "rel", str(CHART), "-f", str(values_file), check=False)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
