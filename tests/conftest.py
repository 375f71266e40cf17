"""Shared pytest wiring: real PostgreSQL / SQLite stores and the real-Kafka lab."""

from __future__ import annotations

import pytest
from hypothesis import settings as hypothesis_settings

from tests.fixtures.lanes import examples, group_for_workers, in_fast_lane, mark_heavy, refuse_in_fast_lane

pytest_plugins = [
    "tests.fixtures.databases",
    "txnwatch.lab.pytest_plugin",
]


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist registers the marker group_for_workers adds; without the plugin (-p no:xdist) it is ours.
    config.addinivalue_line("markers", "xdist_group(name): the tests one xdist worker runs (--dist loadgroup)")
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


@pytest.fixture(autouse=True)
def _process_secrets_restored() -> object:
    """Each test starts with the process-wide secrets (txnwatch.core.redact.register) it found: a notifier a
    test builds registers its key for the rest of the worker's life, and the next test's logs would be
    scrubbed of it, in whatever order xdist runs them."""
    from txnwatch.core import redact

    before = redact.registered()
    yield
    redact.restore(before)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_heavy(items)
    group_for_workers(items)
