"""Shared pytest wiring: real PostgreSQL / SQLite stores and the real-Kafka lab."""

from __future__ import annotations

import pytest
from hypothesis import settings as hypothesis_settings

from tests.fixtures.lanes import examples, in_fast_lane, mark_heavy, refuse_in_fast_lane

pytest_plugins = [
    "tests.fixtures.databases",
    "txnwatch.lab.pytest_plugin",
]


def pytest_configure(config: pytest.Config) -> None:
    if in_fast_lane():
        # Property tests without their own max_examples (Hypothesis's 100) get a third too, as examples() gives
        # those that set one; `make test` keeps Hypothesis's default profile.
        hypothesis_settings.register_profile("fast-lane", max_examples=examples(100))
        hypothesis_settings.load_profile("fast-lane")
        # Every lab cluster, the plugin's and those the end-to-end tests start themselves, goes through start_lab.
        from txnwatch.lab import cluster

        real_start_lab = cluster.start_lab

        def start_lab(*args: object, **kwargs: object) -> object:
            refuse_in_fast_lane("a Kafka lab cluster", "lab")
            return real_start_lab(*args, **kwargs)  # type: ignore[arg-type]  # the real signature, passed through

        cluster.start_lab = start_lab  # type: ignore[assignment]  # a refusing wrapper, in the fast lane only


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_heavy(items)
