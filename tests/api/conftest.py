"""API test wiring: one seeded database per backend per module, read by a TestClient."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.api.factory import BOOTSTRAP, PROD, STAGING, Scenario, seed_scenario
from tests.fixtures.migrated import migrate
from txnwatch.core.config import Settings
from txnwatch.runtime.lifecycle import Runtime
from txnwatch.runtime.wiring import build_runtime
from txnwatch.serve.app import create_app
from txnwatch.store.db import make_engine


def make_settings(url: str, **api: Any) -> Settings:
    return Settings(database_url=url, api=api, clusters=[
        {"name": PROD, "bootstrap_servers": BOOTSTRAP[PROD]},
        {"name": STAGING, "bootstrap_servers": BOOTSTRAP[STAGING]},
    ])


def make_client(runtime: Runtime) -> TestClient:
    return TestClient(create_app(runtime, manage_lifecycle=False), raise_server_exceptions=False)


@dataclass
class Seeded:
    url: str
    scenario: Scenario


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def seeded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Seeded:
    """Read-only tests share one seeded database per module and backend: migrating and seeding per test
    would dominate the run time."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('api') / 'txnwatch.db'}"
    else:
        url = request.getfixturevalue("postgres_server").create_database("api_" + uuid.uuid4().hex[:12])
    migrate(url)
    engine = make_engine(url)
    try:
        with Session(engine) as session:
            scenario = seed_scenario(session)
    finally:
        engine.dispose()
    return Seeded(url, scenario)


@pytest.fixture(scope="module")
def runtime(seeded: Seeded) -> Iterator[Runtime]:
    rt = build_runtime(make_settings(seeded.url), collect=False)
    yield rt
    rt.engine.dispose()


@pytest.fixture(scope="module")
def client(runtime: Runtime) -> Iterator[TestClient]:
    with make_client(runtime) as c:
        yield c


@pytest.fixture
def scenario(seeded: Seeded) -> Scenario:
    return seeded.scenario
