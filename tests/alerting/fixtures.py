"""Fixtures of the alerting tests, imported by each test module so they also run with --noconftest."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from tests.alerting.fake_pagerduty import FakePagerDuty, fake_pagerduty
from txnwatch.store.db import make_sessionmaker


@pytest.fixture
def pagerduty() -> Iterator[FakePagerDuty]:
    with fake_pagerduty() as server:
        yield server


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(engine)
