"""The Helm chart: lint, render, Kubernetes/CRD schema validation, rules, dashboards, config, bad values."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.deploy.tools import (
    CHART,
    ROOT,
    RULES,
    RULES_TEST,
    dashboard_files,
    localize_paths,
    materialize_secret_mounts,
    pod_env,
    run,
    secret_data,
    tool,
)

PRODUCTION = Path(__file__).with_name("values-production.yaml")
SCHEMAS = Path(__file__).with_name("schemas")
K8S_VERSION = "1.30.0"
CRD_SCHEMAS = {"ServiceMonitor": "servicemonitor.json", "PrometheusRule": "prometheusrule.json"}
VALUES = {"default": [], "production": ["-f", str(PRODUCTION)]}


def helm(*args: str, check: bool = True) -> Any:
    return run(tool("helm"), *args, check=check)


def render(*args: str) -> list[dict[str, Any]]:
    out = helm("template", "rel", str(CHART), "--namespace", "observability", *args).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.fixture(scope="module", params=sorted(VALUES))
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(*VALUES[request.param])


@pytest.mark.parametrize("values", sorted(VALUES))
def test_helm_lint_strict(values: str) -> None:
    helm("lint", "--strict", str(CHART), *VALUES[values])


def test_manifests_match_kubernetes_and_crd_schemas(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = rendered
    errors = []
    for doc in docs:
        where = f"{name}: {doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in CRD_SCHEMAS:
            schema = json.loads((SCHEMAS / CRD_SCHEMAS[doc["kind"]]).read_text())
            errors += [f"{where}: {e.message} at {list(e.absolute_path)}"
                       for e in jsonschema.Draft7Validator(schema).iter_errors(doc)]
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{where}: {exc.message} at {list(exc.path)}")
    assert errors == []


def test_expected_objects() -> None:
    kinds = sorted(d["kind"] for d in render())
    assert kinds == sorted(["ServiceAccount", "ConfigMap", "ConfigMap", "Service", "Deployment", "ServiceMonitor",
                            "PrometheusRule", "NetworkPolicy", "PodDisruptionBudget", "PersistentVolumeClaim"])
    kinds = sorted(d["kind"] for d in render(*VALUES["production"]))
    assert kinds == sorted(["ServiceAccount", "Secret", "Secret", "ConfigMap", "ConfigMap", "Service", "Deployment",
                            "CronJob", "Job", "ServiceMonitor", "PrometheusRule", "NetworkPolicy",
                            "NetworkPolicy", "PodDisruptionBudget"])  # PostgreSQL: no PVC; the pipeline's own policy


def test_deployment_is_hardened(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, docs = rendered
    (deploy,) = by_kind(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (c,) = pod["containers"]
    assert c["args"] == ["run", "--config", "/etc/txnwatch/config.yaml"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                          {"name": "metrics", "containerPort": 8081, "protocol": "TCP"}]
    (service,) = by_kind(docs, "Service")
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {"http": "http", "metrics": "metrics"}
    (monitor,) = by_kind(docs, "ServiceMonitor")  # Prometheus scrapes the metrics port (issue 25)
    assert [(e["port"], e["path"]) for e in monitor["spec"]["endpoints"]] == [("metrics", "/metrics")]
    for policy in by_kind(docs, "NetworkPolicy"):
        if policy["spec"]["podSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]:
            assert [p["port"] for p in policy["spec"]["ingress"][0]["ports"]] == ["http", "metrics"]
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert mounts["/etc/txnwatch/config.yaml"] == "config"
    env = {e["name"]: e for e in c["env"]}
    assert env["TXNWATCH_CONFIG"]["value"] == "/etc/txnwatch/config.yaml"
    for other in by_kind(docs, "Job") + by_kind(docs, "CronJob"):
        spec = other["spec"].get("jobTemplate", other)["spec"]["template"]["spec"]
        for container in spec["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True


def _secret_data(docs: list[dict[str, Any]], name: str) -> dict[str, str]:
    return {k: v.decode() for k, v in secret_data(docs, name).items()}


def _pod_env(docs: list[dict[str, Any]], container: dict[str, Any]) -> dict[str, str]:
    return pod_env(docs, container)


def test_rendered_config_loads_with_txnwatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ConfigMap plus the pod's TXNWATCH_* environment are a valid txnwatch configuration."""
    from txnwatch.core.config import load_settings

    docs = render(*VALUES["production"])
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if "config.yaml" in d["data"]]
    (deploy,) = by_kind(docs, "Deployment")
    pod = deploy["spec"]["template"]["spec"]
    env = _pod_env(docs, pod["containers"][0])
    mounts = materialize_secret_mounts(docs, pod, pod["containers"][0], tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(localize_paths(cm["data"]["config.yaml"], mounts))
    for key in [k for k in list(__import__("os").environ) if k.startswith("TXNWATCH_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    settings = load_settings(config)
    assert settings.database_url.startswith("postgresql+psycopg://")
    assert settings.api.host == "0.0.0.0" and settings.api.port == 8080 and settings.metrics.port == 8081
    clusters = {c.name: c for c in settings.clusters}
    eu, us = clusters["prod-eu"].sasl_password, clusters["prod-us"].sasl_password
    assert eu is not None and eu.get_secret_value() == "eu-password"
    assert us is not None and us.get_secret_value() == "us-password"
    routing_key = settings.pagerduty.routing_key
    assert routing_key is not None and routing_key.get_secret_value() == "R0UT1NGKEY0000000000000000000000"
    assert (settings.fleet.lease_seconds, settings.fleet.margin_seconds) == (20, 4)  # two replicas share the clusters
    assert settings.api.trusted_proxies == ["10.42.0.0/16"]  # the Ingress controller's pods (trustedProxies)
    assert "s3cret" not in cm["data"]["config.yaml"] and "eu-password" not in cm["data"]["config.yaml"]


def test_default_config_loads_with_txnwatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from txnwatch.core.config import load_settings

    (cm,) = [d for d in by_kind(render(), "ConfigMap") if "config.yaml" in d["data"]]
    config = tmp_path / "config.yaml"
    config.write_text(cm["data"]["config.yaml"])
    for key in [k for k in list(__import__("os").environ) if k.startswith("TXNWATCH_")]:
        monkeypatch.delenv(key)
    settings = load_settings(config)
    assert settings.database_url == "sqlite:////var/lib/txnwatch/txnwatch.db"
    assert settings.api.trusted_proxies == ["127.0.0.1", "::1"]  # a sidecar in the pod, nobody else


def test_migrations() -> None:
    (deploy,) = by_kind(render(), "Deployment")
    (init,) = deploy["spec"]["template"]["spec"]["initContainers"]   # SQLite: migrate inside the pod
    assert init["args"][0] == "migrate"
    docs = render(*VALUES["production"])
    (job,) = by_kind(docs, "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    (c,) = job["spec"]["template"]["spec"]["containers"]
    assert c["args"] == ["migrate"]
    assert _pod_env(docs, c)["TXNWATCH_DATABASE_URL"].startswith("postgresql+psycopg://")
    (hook_secret,) = [d for d in by_kind(docs, "Secret") if "helm.sh/hook" in d["metadata"].get("annotations", {})]
    assert int(hook_secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < 0
    (deploy,) = by_kind(docs, "Deployment")
    assert "initContainers" not in deploy["spec"]["template"]["spec"]
    (cron,) = by_kind(docs, "CronJob")
    args = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:4] == ["pipeline", "run", "--config", "/etc/txnwatch/config.yaml"]


def test_existing_secret() -> None:
    docs = render("--set", "secrets.existingSecret=mine", "--set", "replicaCount=2")
    assert by_kind(docs, "Secret") == []
    (deploy,) = by_kind(docs, "Deployment")
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in deploy["spec"]["template"]["spec"]["containers"][0]["env"]
            if "valueFrom" in e}
    assert refs["TXNWATCH_DATABASE_URL"] == {"name": "mine", "key": "database-url"}
    assert refs["TXNWATCH_PAGERDUTY__ROUTING_KEY"]["optional"] is True
    (job,) = by_kind(docs, "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"]["name"] == "mine"


def test_prometheus_rule_is_the_rules_file(rendered: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    name, docs = rendered
    (rule,) = by_kind(docs, "PrometheusRule")
    expected = yaml.safe_load(RULES.read_text())
    default_runbooks = "https://github.com/txnwatch/txnwatch/blob/main/docs/runbooks.md"
    if name == "production":  # its own runbooks, and built-in paging on: the rules notify, never page
        base = yaml.safe_load(PRODUCTION.read_text())["prometheusRule"]["runbookBaseUrl"]
        expected = yaml.safe_load(RULES.read_text().replace(default_runbooks, base)
                                  .replace("severity: page", "severity: notify"))
    assert rule["spec"] == expected
    # promtool on what the operator would load
    rules = tmp_path / "txnwatch-rules.yaml"
    rules.write_text(yaml.safe_dump(rule["spec"]))
    run(tool("promtool"), "check", "rules", str(rules))
    unit = RULES_TEST.read_text()
    if name == "production":
        unit = unit.replace(default_runbooks, base).replace("severity: page", "severity: notify")
    (tmp_path / "txnwatch-rules.test.yaml").write_text(unit)
    run(tool("promtool"), "test", "rules", "txnwatch-rules.test.yaml", cwd=tmp_path)


def test_notes_render() -> None:
    out = helm("install", "rel", str(CHART), "--dry-run=client", "--namespace", "observability").stdout
    notes = out.split("NOTES:", 1)[1]
    assert "port-forward svc/rel-txnwatch 8080:8080" in notes
    assert "config.clusters is empty" in notes and "SQLite" in notes
    out = helm("install", "rel", str(CHART), "--dry-run=client", *VALUES["production"]).stdout
    assert "3 Kafka cluster(s) prod-eu prod-us staging" in out and "SQLite" not in out.split("NOTES:", 1)[1]


def test_dashboards_configmap(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    name, docs = rendered
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboards")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == ("monitoring" if name == "production" else "observability")
    assert sum(len(v) for v in cm["data"].values()) < 900 * 1024, "ConfigMaps hold at most 1 MiB"
    assert {k: json.loads(v) for k, v in cm["data"].items()} == \
        {p.name: json.loads(p.read_text()) for p in dashboard_files()}


BAD_VALUES = [
    (["--set", "replicaCount=two"], "replicaCount"),
    (["--set", "image.pullPolicy=Sometimes"], "pullPolicy"),
    (["--set", "securityContext.readOnlyRootFilesystem=false"], "readOnlyRootFilesystem"),
    (["--set", "podSecurityContext.runAsNonRoot=false"], "runAsNonRoot"),
    (["--set", "service.port=70000"], "port"),
    (["--set", "serviceMonitor.interval=often"], "interval"),
    (["--set", "pipeline.schedule=tomorrow"], "schedule"),
    (["--set", "unknownKey=1"], "unknownKey"),
    (["--set", "config.log_level=LOUD"], "log_level"),
    (["--set", "config.clusters[0].name=bad name!", "--set", "config.clusters[0].bootstrap_servers[0]=k:9092"], "name"),
    (["--set", "config.clusters[0].name=a", "--set", "config.clusters[0].bootstrap_servers[0]=k:9092",
      "--set", "config.clusters[0].security_protocol=KERBEROS"], "security_protocol"),
    (["--set", "secrets.databaseUrl=mysql://x"], "databaseUrl"),
    (["--set", "replicaCount=2"], "replicaCount > 1 needs PostgreSQL"),
    (["--set", "config.fleet.lease_seconds=1"], "lease_seconds"),
    (["--set", "config.fleet.lease=15"], "lease"),
    (["--set", "pipeline.enabled=true"], "pipeline.enabled needs a shared history archive"),
    (["--set", "config.pagerduty.enabled=true"], "secrets.pagerdutyRoutingKey"),
    (["--set", "config.database_url=postgresql://u:p@h/db"], "secrets.databaseUrl"),
    (["--set", "config.pagerduty.routing_key=abc"], "secrets.pagerdutyRoutingKey"),
    (["--set", "config.api.admin_token=abc"], "secrets.apiAdminToken"),
    (["--set", "config.api.trusted_proxies[0]=10.0.0.0/8"], "use trustedProxies"),
    (["--set", "secrets.apiReadToken=two words"], "secrets.apiReadToken must be visible ASCII"),
    (["--set-string", "secrets.apiAdminToken=t\u00f6ken"], "secrets.apiAdminToken must be visible ASCII"),
    (["--set", "config.clusters[0].name=a", "--set", "config.clusters[0].bootstrap_servers[0]=k:9092",
      "--set", "config.clusters[0].sasl_password=pw"], "secrets.saslPasswords.a"),
    (["--set", "config.clusters[0].name=a", "--set", "config.clusters[0].bootstrap_servers[0]=k:9092",
      "--set", "config.clusters[0].security_protocol=SASL_SSL"], "set secrets.saslPasswords.a"),
]


@pytest.mark.parametrize(("args", "message"), BAD_VALUES, ids=[m for _, m in BAD_VALUES])
def test_bad_values_are_rejected(args: list[str], message: str) -> None:
    proc = helm("template", "rel", str(CHART), *args, check=False)
    assert proc.returncode != 0, f"{args} was accepted"
    assert message in proc.stderr, proc.stderr


def test_chart_readme_documents_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    documented = set(re.findall(r"^\| `([A-Za-z0-9_.]+)` \|", readme, re.M))

    def leaves(prefix: str, node: Any) -> set[str]:
        if isinstance(node, dict) and node and prefix not in {"config", "podSecurityContext", "securityContext",
                                                              "resources", "migrations.resources",
                                                              "pipeline.resources", "affinity"}:
            return set().union(*(leaves(f"{prefix}.{k}" if prefix else k, v) for k, v in node.items()))
        return {prefix}

    values = yaml.safe_load((CHART / "values.yaml").read_text())
    def covered(key: str) -> bool:
        parts = key.split(".")
        return any(".".join(parts[:i]) in documented for i in range(1, len(parts) + 1))

    missing = sorted(k for k in leaves("", values) if not covered(k))
    assert missing == []


def test_root_rules_file_is_not_forked() -> None:
    assert (ROOT / "helm" / "txnwatch" / "files" / "txnwatch-rules.yaml").read_bytes() == RULES.read_bytes()
