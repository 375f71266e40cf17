"""Pages carry absolute links and a reachable client URL; one paging path; webhook/Slack from config.

Issue 15, defects 8 and 9: relative runbook links were dropped by PagerDuty, the client URL was
the listen address (``http://0.0.0.0:8080`` in Kubernetes), the Prometheus hanging rule counted
per cluster, both paging paths could page at once, and no config reached the webhook and Slack
notifiers.  The per-partition Prometheus rule is checked by promtool (tests/deploy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty
from tests.alerting.fixtures import pagerduty, sessions  # noqa: F401  (fixtures)
from tests.alerting.helpers import ROUTING_KEY, at, hanging
from tests.deploy.tools import render_chart
from txnwatch.alerting import Alerting
from txnwatch.core.config import Settings
from txnwatch.runtime.wiring import build_runtime

PUBLIC = "https://txnwatch.example.com"


def settings(url: str, **extra: Any) -> Settings:
    return Settings(pagerduty={"enabled": True, "routing_key": ROUTING_KEY, "events_url": url},
                    alert_rules={"hanging_transaction": {"for_seconds": 0}}, **extra)


def page(alerting: Alerting, pd: FakePagerDuty) -> dict[str, object]:
    alerting.evaluate("prod", [hanging()], at(0))
    alerting.dispatcher.run_once(at(0))
    (trigger,) = [e for e in pd.accepted if e["event_action"] == "trigger"]
    return trigger


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize(("extra", "client", "runbook"), [
    pytest.param({}, None, "https://github.com/txnwatch/txnwatch/blob/main/docs/runbooks.md#kafkahangingtransaction",
                 id="defaults"),
    pytest.param({"public_url": PUBLIC}, PUBLIC, PUBLIC + "/console/runbooks#kafkahangingtransaction", id="public-url"),
    pytest.param({"public_url": PUBLIC, "console": {"runbook_url": "https://wiki.example/runbooks"}}, PUBLIC,
                 "https://wiki.example/runbooks#kafkahangingtransaction", id="own-runbooks"),
])
def test_every_page_links_absolute_urls(sessions: sessionmaker[Session], pagerduty: FakePagerDuty,
                                        extra: dict[str, object], client: str | None, runbook: str) -> None:
    trigger = page(Alerting.from_settings(settings(pagerduty.url, **extra), sessions), pagerduty)
    assert trigger.get("client_url") == client
    assert trigger["links"] == [{"href": runbook, "text": "Runbook: hanging_transaction"}]


def test_the_daemon_never_sends_its_listen_address_as_client_url(tmp_path: Path) -> None:
    built = build_runtime(Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite'}",
                                   api={"host": "0.0.0.0", "port": 8080},
                                   pagerduty={"enabled": True, "routing_key": ROUTING_KEY}))
    (service,) = [s for s in built.services if s.name == "alerting"]
    alerting = service.stop.__self__  # type: ignore[attr-defined]  # a bound method's __self__ is the service that owns it
    context = alerting._notifiers["pagerduty"]._context
    assert context.client_url is None and "0.0.0.0" not in repr(context)
    built.engine.dispose()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_webhook_and_slack_come_from_config(sessions: sessionmaker[Session], pagerduty: FakePagerDuty) -> None:
    alerting = Alerting.from_settings(settings(pagerduty.url, notifiers={
        "webhook": {"enabled": True, "url": pagerduty.base + "/hooks/generic"},
        "slack": {"enabled": True, "url": pagerduty.base + "/hooks/slack/T0/SECRET"}}), sessions)
    page(alerting, pagerduty)
    assert sorted({p for p, _ in pagerduty.hooks}) == ["/hooks/generic", "/hooks/slack/T0/SECRET"]


def test_a_webhook_without_url_is_a_config_error() -> None:
    from txnwatch.core.config import ConfigError, load_settings

    with pytest.raises(ConfigError, match=r"notifiers\.slack: enabled needs url"):
        load_settings(None, notifiers={"slack": {"enabled": True}})


def test_prometheus_rules_do_not_page_beside_built_in_paging(tmp_path: Path) -> None:
    def severities(values: dict[str, object]) -> set[str]:
        (rule,) = [d for d in render_chart(values, tmp_path) if d["kind"] == "PrometheusRule"]
        return {r["labels"]["severity"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r}

    assert "page" in severities({})  # built-in paging off: Alertmanager may page from the rules
    both = severities({"config": {"pagerduty": {"enabled": True}}, "secrets": {"pagerdutyRoutingKey": "k"}})
    assert "page" not in both and "notify" in both
