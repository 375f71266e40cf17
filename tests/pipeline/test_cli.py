"""The CLI's refusals: one line for the operator, no Spark started."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from txnwatch.core import exitcodes
from txnwatch.pipeline import prefix
from txnwatch.pipeline.cli import app, parse_conf
from txnwatch.pipeline.session import INSTALL_HINT, JavaMissing, check_java

runner = CliRunner()


def _fake_java(tmp_path: Path, version: str) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\" 2021-01-01' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return home


@pytest.mark.parametrize("version", ["1.8.0_292", "11.0.2"])
def test_old_java_is_refused_with_the_package_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          version: str) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, version)))
    with pytest.raises(JavaMissing, match="openjdk-17-jre-headless"):
        check_java()
    result = runner.invoke(app, ["run", "--no-db", "--no-export", "--archive", str(tmp_path)])
    assert result.exit_code == exitcodes.MISSING_DEPENDENCY and INSTALL_HINT in result.output


def test_missing_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(JavaMissing, match="none was found on JAVA_HOME"):
        check_java()


def test_java_17_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, "17.0.15")))
    check_java()


def test_bad_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "c.yaml"
    bad.write_text("no_such_setting: 1\n")
    result = runner.invoke(app, ["export", "--config", str(bad)])
    assert result.exit_code == 2 and result.output.count("\n") == 1


def test_bad_dates_and_rules(tmp_path: Path) -> None:
    assert runner.invoke(app, ["run", "--since", "yesterday", "--archive", str(tmp_path)]).exit_code == 2
    assert runner.invoke(app, ["run", "--since", "2026-11-02", "--until", "2026-11-01"]).exit_code == 2
    assert runner.invoke(app, ["run", "--prefix-rule", "first:x"]).exit_code == 2


@pytest.mark.parametrize("item", [
    pytest.param("spark.executor.memory", id="no-equals"),
    pytest.param("executor.memory=2g", id="not-a-spark-key"),
    pytest.param("=2g", id="empty-key"),
    pytest.param("spark.=1", id="bare-prefix"),
])
def test_bad_spark_conf_is_refused_before_spark_starts(tmp_path: Path, item: str) -> None:
    result = runner.invoke(app, ["run", "--no-db", "--no-export", "--archive", str(tmp_path), "--conf", item])
    assert result.exit_code == 2 and "expected spark.KEY=VALUE" in result.output, result.output


def test_spark_conf_pairs_keep_their_values() -> None:
    # Values may hold '=' and be empty (spark-submit splits at the first '='); the last of a repeated key wins.
    assert parse_conf(["spark.driver.extraJavaOptions=-Da=b -Dc=d", "spark.x=", "spark.y=1", "spark.y=2"]) == {
        "spark.driver.extraJavaOptions": "-Da=b -Dc=d", "spark.x": "", "spark.y": "2"}


@pytest.mark.parametrize(("rule", "txn_id", "expected"), [
    ("last-dash", "orders-app-3", "orders-app"), ("last-dash", "solo", "solo"), ("first:3", "orders-1", "ord"),
    ("regex:^([a-z]+)", "orders-1", "orders"), ("regex:^([0-9]+)", "orders-1", "orders-1"), ("none", "a-1", "a-1")])
def test_prefix_rules_in_python(rule: str, txn_id: str, expected: str) -> None:
    assert prefix.prefix_of(rule, txn_id) == expected


@pytest.mark.spark
def test_prefix_rules_agree_with_spark(spark: object) -> None:
    from pyspark.sql import functions as F

    ids = ["orders-app-3", "solo", "a-", "-b", "x-y-z-9"]
    df = spark.createDataFrame([(i,) for i in ids], "tid string")  # type: ignore[attr-defined]  # pyspark is untyped here
    for rule in ("last-dash", "first:2", "regex:^(.*?)-", "none"):
        got = [r[0] for r in df.select(prefix.prefix_column(rule, F.col("tid"))).collect()]
        assert got == [prefix.prefix_of(rule, i) for i in ids], rule
