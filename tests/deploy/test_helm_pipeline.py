"""The chart's pipeline CronJob: its own image (PySpark + Java), the daemon's config and volumes, Spark's master.

The daemon image has neither PySpark nor Java, so a CronJob running it could never work: these tests pin
that the job names the pipeline image (the name scripts/build-image.sh gives the `pipeline` target), that
its arguments are ones the real `txnwatch pipeline run` parser accepts, and that a Spark cluster master gets
what a driver in a pod needs (its address and fixed ports, a NetworkPolicy letting executors in, RBAC for
k8s://). Building and running the image itself is tests/deploy/test_pipeline_image.py.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml

from tests.deploy.tools import CHART, ROOT, pod_env, render_chart, run, tool

K8S_VERSION = "1.30.0"
ENABLED: dict[str, Any] = {"pipeline": {"enabled": True}, "archive": {"existingClaim": "txnwatch-archive"}}
FIELDS = {"status.podIP": "10.1.2.3", "metadata.name": "rel-txnwatch-pipeline-29000000-abcde"}


def _values(**pipeline: Any) -> dict[str, Any]:
    return {**ENABLED, "pipeline": {"enabled": True, **pipeline}}


def _with(values: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {**values, **top}


def _kind(docs: list[dict[str, Any]], kind: str, suffix: str = "") -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(suffix)]


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (cron,) = _kind(docs, "CronJob")
    return dict(cron["spec"]["jobTemplate"]["spec"]["template"])


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (container,) = _pod(docs)["spec"]["containers"]
    return dict(container)


def _expanded_args(docs: list[dict[str, Any]]) -> list[str]:
    """The container's args after Kubernetes' $(VAR) expansion from its own environment."""
    container = _container(docs)
    env = pod_env(docs, container, FIELDS)
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in container["args"]]


def _parsed(args: list[str]) -> dict[str, Any]:
    """The rendered args through the real CLI's parser (typer/click), without running Spark."""
    from txnwatch.pipeline.cli import app, parse_conf

    assert args[:2] == ["pipeline", "run"], args
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    command = group.get_command(group.make_context("pipeline", ["run", "--help"], resilient_parsing=True), "run")
    assert command is not None
    params = dict(command.make_context("run", list(args[2:])).params)
    params["conf"] = parse_conf(params.get("conf") or [])
    return params


def _schema_errors(docs: list[dict[str, Any]]) -> list[str]:
    errors = []
    for doc in docs:
        if doc["kind"] in {"ServiceMonitor", "PrometheusRule"}:  # CRDs: test_helm.py checks them
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{doc['kind']}/{doc['metadata']['name']}: {exc.message} at {list(exc.path)}")
    return errors


def _lint(values: dict[str, Any], tmp_path: Path) -> None:
    values_file = tmp_path / "lint-values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    run(tool("helm"), "lint", "--strict", str(CHART), "-f", str(values_file))


def test_the_job_runs_the_pipeline_image_build_image_sh_makes(tmp_path: Path) -> None:
    built = subprocess.run(["bash", str(ROOT / "scripts" / "build-image.sh"), "--name"], capture_output=True,
                           text=True, timeout=60, env=os.environ | {"TXNWATCH_IMAGE_TARGET": "pipeline"},
                           check=True).stdout.strip()
    daemon = subprocess.run(["bash", str(ROOT / "scripts" / "build-image.sh"), "--name"], capture_output=True,
                            text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                        if k not in {"TXNWATCH_IMAGE_TARGET", "TXNWATCH_IMAGE"}},
                            check=True).stdout.strip()
    docs = render_chart(ENABLED, tmp_path)
    (deploy,) = _kind(docs, "Deployment")
    assert deploy["spec"]["template"]["spec"]["containers"][0]["image"] == daemon
    assert _container(docs)["image"] == built == f"{daemon}-pipeline"
    assert _container(docs)["imagePullPolicy"] == "IfNotPresent"


@pytest.mark.parametrize(("values", "image", "policy"), [
    pytest.param({"image": {"repository": "reg.example/tw", "tag": "1.2.3", "pullPolicy": "Always"}},
                 "reg.example/tw:1.2.3-pipeline", "Always", id="follows-the-release-image"),
    pytest.param({"image": {"repository": "reg.example/tw", "tag": "1.2.3"},
                  "pipeline": {"enabled": True, "image": {"repository": "reg.example/tw-spark", "tag": "7",
                                                          "pullPolicy": "Never"}}},
                 "reg.example/tw-spark:7", "Never", id="own-image"),
    pytest.param({"pipeline": {"enabled": True, "image": {"tag": "nightly"}}},
                 "ghcr.io/txnwatch/txnwatch:nightly", "IfNotPresent", id="own-tag-only"),
])
def test_pipeline_image_values(tmp_path: Path, values: dict[str, Any], image: str, policy: str) -> None:
    docs = render_chart({**ENABLED, **values}, tmp_path)
    assert (_container(docs)["image"], _container(docs)["imagePullPolicy"]) == (image, policy)


def test_config_secrets_and_volumes_are_the_daemons(tmp_path: Path) -> None:
    production = yaml.safe_load((Path(__file__).with_name("values-production.yaml")).read_text())
    docs = render_chart(production, tmp_path)
    (deploy,) = _kind(docs, "Deployment")
    daemon_pod = deploy["spec"]["template"]["spec"]
    (daemon,) = daemon_pod["containers"]
    pipeline = _container(docs)
    assert pipeline["volumeMounts"] == daemon["volumeMounts"]
    assert _pod(docs)["spec"]["volumes"] == daemon_pod["volumes"]
    mounts = {m["mountPath"]: m["name"] for m in pipeline["volumeMounts"]}
    assert mounts["/var/lib/txnwatch/archive"] == "archive" and mounts["/etc/txnwatch/config.yaml"] == "config"
    assert mounts["/tmp"] == "tmp"
    daemon_env = pod_env(docs, daemon)
    pipeline_env = pod_env(docs, pipeline, FIELDS)
    assert {k: v for k, v in pipeline_env.items() if k.startswith("TXNWATCH_") and "POD" not in k} == daemon_env
    assert pipeline_env["SPARK_LOCAL_DIRS"] == "/tmp" and pipeline_env["HOME"] == "/tmp"
    assert pipeline["securityContext"] == daemon["securityContext"]
    assert pipeline["resources"] == production["pipeline"]["resources"]
    assert _kind(docs, "CronJob")[0]["spec"]["jobTemplate"]["spec"]["activeDeadlineSeconds"] == 7200
    params = _parsed(_expanded_args(docs))
    assert (params["master"], params["driver_memory"], params["conf"]) == ("local[2]", "1536m", {})
    assert params["config"] == Path("/etc/txnwatch/config.yaml")


@pytest.mark.parametrize("job", ["pipeline", "migrate"])
def test_job_pods_are_not_daemon_replicas(tmp_path: Path, job: str) -> None:
    """Every daemon selector (Deployment, Service, PodDisruptionBudget, the API's NetworkPolicy) must miss
    the pipeline's and the migration hook's pods: a Service endpoint on a Job's pod (Ready as soon as it
    runs, having no readiness probe) would take API traffic it cannot answer."""
    docs = render_chart(_with(ENABLED, secrets={"databaseUrl": "postgresql+psycopg://u:p@db/t"}), tmp_path)
    if job == "pipeline":
        labels = _pod(docs)["metadata"]["labels"]
    else:
        (migrate,) = _kind(docs, "Job", "-migrate")
        labels = migrate["spec"]["template"]["metadata"]["labels"]
    (deploy,) = _kind(docs, "Deployment")
    (service,) = _kind(docs, "Service")
    (pdb,) = _kind(docs, "PodDisruptionBudget")
    (api_policy,) = [d for d in _kind(docs, "NetworkPolicy") if not d["metadata"]["name"].endswith("-pipeline")]
    selectors = {"Deployment": deploy["spec"]["selector"]["matchLabels"], "Service": service["spec"]["selector"],
                 "PodDisruptionBudget": pdb["spec"]["selector"]["matchLabels"],
                 "NetworkPolicy": api_policy["spec"]["podSelector"]["matchLabels"]}
    daemon_labels = deploy["spec"]["template"]["metadata"]["labels"]
    for kind, selector in selectors.items():
        assert selector.items() <= daemon_labels.items(), f"{kind} does not select the daemon"
        assert not selector.items() <= labels.items(), f"{kind} selects the pipeline's pods"
    if job == "pipeline":
        (policy,) = _kind(docs, "NetworkPolicy", "-pipeline")
        assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()


def test_local_spark_by_default_with_no_ingress_and_no_api_token(tmp_path: Path) -> None:
    docs = render_chart(ENABLED, tmp_path)
    params = _parsed(_expanded_args(docs))
    assert (params["master"], params["driver_memory"], params["conf"]) == ("local[*]", "1g", {})
    assert "ports" not in _container(docs)
    assert _pod(docs)["spec"]["automountServiceAccountToken"] is False
    (policy,) = _kind(docs, "NetworkPolicy", "-pipeline")
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []
    assert _kind(docs, "Role") == [] and _kind(docs, "RoleBinding") == []


def test_sqlite_pipeline_lands_on_the_daemons_node(tmp_path: Path) -> None:
    """With SQLite the export step reads the daemon's ReadWriteOnce volume: only the daemon's node can mount it."""
    docs = render_chart(ENABLED, tmp_path)
    (deploy,) = _kind(docs, "Deployment")
    (term,) = _pod(docs)["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= deploy["spec"]["template"]["metadata"]["labels"].items()
    postgres = render_chart(_with(ENABLED, secrets={"databaseUrl": "postgresql+psycopg://u:p@db/t"}), tmp_path)
    assert "affinity" not in _pod(postgres)["spec"]


def test_spark_standalone_master_makes_the_pod_a_reachable_driver(tmp_path: Path) -> None:
    values = _values(spark={"master": "spark://spark-master.spark:7077", "driverMemory": "2g",
                            "conf": {"spark.executor.memory": "2g", "spark.cores.max": 8,
                                     "spark.driver.port": "40000"}},
                     extraArgs=["--top", "20"])
    values = _with(values, networkPolicy={"enabled": True, "ingressFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "spark"}}}]})
    docs = render_chart(values, tmp_path)
    assert _schema_errors(docs) == []
    _lint(values, tmp_path)
    params = _parsed(_expanded_args(docs))
    assert params["master"] == "spark://spark-master.spark:7077" and params["top"] == 20
    assert params["conf"] == {"spark.driver.host": FIELDS["status.podIP"], "spark.driver.bindAddress": "0.0.0.0",
                              "spark.driver.blockManager.port": "7079", "spark.executor.memory": "2g",
                              "spark.cores.max": "8",
                              "spark.driver.port": "40000"}  # the operator's conf overrides the chart's
    ports = {p["name"]: p["containerPort"] for p in _container(docs)["ports"]}
    assert ports == {"spark-driver": 7078, "spark-blocks": 7079}
    (policy,) = _kind(docs, "NetworkPolicy", "-pipeline")
    (rule,) = policy["spec"]["ingress"]
    assert {p["port"] for p in rule["ports"]} == {7078, 7079}
    assert rule["from"] == [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "spark"}}}]
    assert _pod(docs)["spec"]["automountServiceAccountToken"] is False


def test_kubernetes_master_gets_rbac_and_owns_its_executors(tmp_path: Path) -> None:
    values = _values(spark={"master": "k8s://https://kubernetes.default.svc", "driverMemory": "1g",
                            "conf": {"spark.kubernetes.container.image": "apache/spark:4.3.0",
                                     "spark.executor.instances": 4}})
    docs = render_chart(values, tmp_path)
    params = _parsed(_expanded_args(docs))
    assert params["conf"]["spark.kubernetes.namespace"] == "ns"
    assert params["conf"]["spark.kubernetes.driver.pod.name"] == FIELDS["metadata.name"]
    assert params["conf"]["spark.kubernetes.container.image"] == "apache/spark:4.3.0"
    assert params["conf"]["spark.driver.host"] == FIELDS["status.podIP"]
    pod = _pod(docs)["spec"]
    assert pod["automountServiceAccountToken"] is True
    (role,) = _kind(docs, "Role")
    (binding,) = _kind(docs, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": "ns"}]
    (pods_rule,) = [r for r in role["rules"] if "pods" in r["resources"]]
    assert {"create", "delete", "watch", "list"} <= set(pods_rule["verbs"])
    assert _schema_errors(docs) == []
    _lint(values, tmp_path)
    no_rbac = _values(spark={**values["pipeline"]["spark"], "kubernetesRbac": False})
    assert _kind(render_chart(no_rbac, tmp_path), "Role") == []


BAD = [
    pytest.param(_values(spark={"master": "locall", "driverMemory": "1g"}), "master", id="master-typo"),
    pytest.param(_values(spark={"master": "local[*]", "driverMemory": "lots"}), "driverMemory", id="driver-memory"),
    pytest.param(_values(spark={"master": "local[*]", "driverMemory": "1g", "conf": {"executor.memory": "2g"}}),
                 "executor.memory", id="conf-not-spark"),
    pytest.param(_values(image={"pullPolicy": "Sometimes"}), "pullPolicy", id="pull-policy"),
    pytest.param(_values(spark={"master": "k8s://https://kubernetes.default.svc", "driverMemory": "1g"}),
                 "spark.kubernetes.container.image", id="k8s-without-executor-image"),
    pytest.param(_with(_values(spark={"master": "k8s://https://k", "driverMemory": "1g",
                                      "conf": {"spark.kubernetes.container.image": "i"}}),
                       serviceAccount={"create": False, "name": ""}), "serviceAccount", id="k8s-without-account"),
    pytest.param({"pipeline": {"enabled": True}}, "pipeline.enabled needs a shared history archive", id="no-archive"),
]


@pytest.mark.parametrize(("values", "message"), BAD)
def test_bad_pipeline_values_are_rejected(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    proc = run(tool("helm"), "template", "rel", str(CHART), "-f", str(values_file), check=False)
    assert proc.returncode != 0, f"{values} was accepted"
    assert message in proc.stderr, proc.stderr


def test_dockerfile_pipeline_target_holds_spark_and_checks_java() -> None:
    """The image side, without building it (the build is tests/deploy/test_pipeline_image.py, opt-in)."""
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = {name: base for base, name in re.findall(r"^FROM (\S+) AS (\S+)$", dockerfile, re.M)}
    assert stages == {"pipeline": "daemon", "daemon": "${BASE}"}
    pipeline = dockerfile.split("AS pipeline", 1)[1]
    assert "/context/build/image/pipeline" in pipeline and "command -v java" in pipeline
    assert "import pyspark" in pipeline and "check_java()" in pipeline
    assert re.search(r"^USER 10001:10001$", pipeline, re.M)
    script = (ROOT / "scripts" / "build-image.sh").read_text()
    assert re.search(r"pipeline \]\] && base_packages=\$base_packages,openjdk-17-jre-headless", script)


def test_notes_name_the_pipeline_image_and_how_to_run_it(tmp_path: Path) -> None:
    values_file = tmp_path / "values.yaml"
    values_file.write_text(yaml.safe_dump(_with(ENABLED, image={"repository": "reg.example/tw", "tag": "2.0"})))
    out = run(tool("helm"), "install", "rel", str(CHART), "--dry-run=client", "-f", str(values_file)).stdout
    notes = out.split("NOTES:", 1)[1]
    assert "runs image reg.example/tw:2.0-pipeline" in notes
    assert "create job --from=cronjob/rel-txnwatch-pipeline" in notes
    assert "Pipeline:" not in run(tool("helm"), "install", "rel", str(CHART), "--dry-run=client").stdout
