"""Fixtures of the alerting tests, imported by each test module so they also run with --noconftest."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from txnwatch.store.clusters import register_clusters
from txnwatch.store.db import make_sessionmaker


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as server:
        yield server


#: Every cluster name the alerting tests use, registered as the daemon's store does at start.
CLUSTERS = ("prod", "a", "b", "gone", "kept")


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        register_clusters(session, {name: f"{name}-broker:9092" for name in CLUSTERS}, datetime.now(timezone.utc))
    return sessions
