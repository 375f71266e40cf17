from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone

from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from txnwatch.alerting import Condition, OutboxDispatcher, PagerDutyNotifier, evaluate
from txnwatch.alerting.conditions import HANGING_TRANSACTION, abort_command, partition_incident_key, runbook_link
from txnwatch.alerting.rules import effective_rules
from txnwatch.core.backoff import Backoff
from txnwatch.core.config import AlertRuleConfig
from txnwatch.store import models as m

T0 = datetime(2026, 11, 23, 0, 0, tzinfo=timezone.utc)
ROUTING_KEY = "R0UT1NGKEY0123456789abcdefabcdef"
CLUSTER = "prod"


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def hanging(partition: int = 0, producer_id: int = 4001, cluster: str = CLUSTER) -> Condition:
    return Condition(
        rule=HANGING_TRANSACTION,
        incident_key=partition_incident_key(HANGING_TRANSACTION, cluster, "orders", partition, producer_id),
        cluster=cluster,
        summary=f"[{cluster}] hanging transaction on orders-{partition} (producer {producer_id})",
        labels={"topic": "orders", "partition": str(partition)},
        details={"transactional_id": "payments-1", "producer_id": producer_id, "producer_epoch": 3,
                 "age_seconds": 912.0, "hwm_minus_lso": 1200, "since": T0,
                 "suggested_action": abort_command("broker-1:9092", "orders", partition, producer_id, 3, 7),
                 "runbook": runbook_link(HANGING_TRANSACTION)},
    )


def rules(for_seconds: float = 60, **overrides: AlertRuleConfig) -> dict[str, AlertRuleConfig]:
    return effective_rules({HANGING_TRANSACTION: AlertRuleConfig(for_seconds=for_seconds), **overrides})


def step(sessions: sessionmaker[Session], conditions: Iterable[Condition], now: datetime,
         rule_set: dict[str, AlertRuleConfig], cluster: str = CLUSTER) -> None:
    """What the collector does after a poll: one transaction per evaluation."""
    with sessions.begin() as session:
        evaluate(session, cluster, list(conditions), now, rule_set)


def dispatcher(sessions: sessionmaker[Session], url: str, max_attempts: int = 20) -> OutboxDispatcher:
    notifier = PagerDutyNotifier(SecretStr(ROUTING_KEY), events_url=url, timeout_seconds=5)
    return OutboxDispatcher(sessions, {"pagerduty": notifier}, max_attempts=max_attempts,
                            backoff=Backoff(base_s=2, cap_s=60), rng=random.Random(7))


def outbox(sessions: sessionmaker[Session]) -> list[m.OutboxEvent]:
    with sessions() as session:
        return list(session.scalars(select(m.OutboxEvent).order_by(m.OutboxEvent.id)))


def alerts(sessions: sessionmaker[Session]) -> list[m.Alert]:
    with sessions() as session:
        return list(session.scalars(select(m.Alert).order_by(m.Alert.id)))
